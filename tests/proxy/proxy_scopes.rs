//! Caches scoped by selectors, and the cost rule that decides which caches start
//! (`live::caches`, "What a cache may cost"): a node-local kubeplex must never cost the
//! apiserver more than the node's agents would directly (DESIGN.md §7). A configured cache of a
//! node's own pods (`spec.nodeName=NODE`) lists and watches only those, serves the kubelet's
//! read byte for byte, and hears nothing of the other nodes' pods; a read of one named object
//! never starts a cache; a read starts a cache of exactly its own scope, never a wider one.

use kubeplex_test_support as support;

use std::time::Duration;

use kubeplex_sim::seed::ClusterShape;
use serde_json::Value;
use support::stack::Stack;
use support::*;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn shape() -> ClusterShape {
    ClusterShape { nodes: 4, namespaces: 2, pods: 40, configmaps: 6, services: 0 }
}

async fn caches(stack: &Stack) -> Vec<Value> {
    let admin = stack.proxy.admin_addr.expect("admin").to_string();
    let resp = get(&admin, "/debug/caches").await;
    assert_eq!(resp.status, 200);
    resp.json()["caches"].as_array().cloned().unwrap_or_default()
}

/// Every cache once all have synced (within a few seconds).
async fn synced_caches(stack: &Stack) -> Vec<Value> {
    let all = support::stack::caches_once_synced(&stack.proxy).await;
    assert!(all.iter().all(|c| c["synced"] == true), "caches not synced: {all:?}");
    all
}

/// The pods on `node`, as the fake apiserver holds them.
fn pods_on(stack: &Stack, node: &str) -> Vec<(String, String)> {
    let list = stack.sim.list("", "pods");
    list.into_iter()
        .filter(|p| p["spec"]["nodeName"] == node)
        .map(|p| {
            let m = &p["metadata"];
            (m["namespace"].as_str().unwrap().to_string(), m["name"].as_str().unwrap().to_string())
        })
        .collect()
}

async fn events_received(stack: &Stack) -> u64 {
    stack
        .metric_sum("kubeplex_watch_events_received_total", &["resource=\"pods/v1\"", "protobuf"])
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_pods_cache_holds_serves_and_hears_only_that_nodes_pods() {
    let stack = Stack::new(shape(), &["pods:protobuf?fieldSelector=spec.nodeName=node-0"]).await;
    let mine = pods_on(&stack, "node-0");
    assert!(!mine.is_empty() && mine.len() < 40, "the seed puts some pods on node-0");
    let all = caches(&stack).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["field_selector"], "spec.nodeName=node-0");
    assert_eq!(all[0]["objects"], mine.len(), "only node-0's pods were listed");

    // The kubelet's read (its `spec.host` alias too): the apiserver's bytes, from the cache.
    let lists = stack.upstream_calls("LIST");
    for selector in ["spec.nodeName%3Dnode-0", "spec.host%3Dnode-0"] {
        let path = format!("/api/v1/pods?fieldSelector={selector}&resourceVersion=0");
        let headers = [("Accept", PROTOBUF)];
        let via = request(&stack.addr(), http::Method::GET, &path, &headers, None).await;
        let direct = request(&stack.upstream(), http::Method::GET, &path, &headers, None).await;
        assert_eq!(via.status, 200);
        assert_eq!(via.body, direct.body, "{selector}: the apiserver's bytes");
    }
    assert_eq!(stack.served_from("cache").await, 2);
    assert_eq!(stack.upstream_calls("LIST"), lists + 2, "only the direct reads reached it");

    // The upstream watch is scoped too: a change to another node's pod does not reach the
    // cache at all; one to node-0's does, once.
    let other = pods_on(&stack, "node-1");
    let (ns, name) = &other[0];
    let before = events_received(&stack).await;
    stack
        .sim
        .modify("", "pods", ns, name, |p| p["metadata"]["labels"]["touched"] = "yes".into())
        .unwrap();
    let (ns, name) = &mine[0];
    stack
        .sim
        .modify("", "pods", ns, name, |p| p["metadata"]["labels"]["touched"] = "yes".into())
        .unwrap();
    let mut received = before;
    for _ in 0..100 {
        received = events_received(&stack).await;
        if received > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(events_received(&stack).await - before, 1, "only node-0's pod's event");
    assert_eq!(received - before, 1);

    // Reads of another node, or wider than the cache, are not within it: they are not served
    // from it, and start no cache of every pod.
    for path in [
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1",
        "/api/v1/pods?fieldSelector=spec.nodeName%21%3Dnode-0&resourceVersion=0",
    ] {
        let headers = [("Accept", PROTOBUF)];
        let via = request(&stack.addr(), http::Method::GET, path, &headers, None).await;
        let direct = request(&stack.upstream(), http::Method::GET, path, &headers, None).await;
        assert_eq!((via.status, &via.body), (200, &direct.body), "{path}");
    }
    // Each started a cache of its own scope (the cost rule), none of every pod.
    let all = caches(&stack).await;
    let scopes: Vec<&str> = all.iter().filter_map(|c| c["field_selector"].as_str()).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(scopes.contains(&"spec.nodeName=node-1") && scopes.contains(&"spec.nodeName!=node-0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_read_starts_no_cache_and_is_served_by_one_that_holds_it() {
    let stack = Stack::new(shape(), &["nodes?fieldSelector=metadata.name=node-0"]).await;
    // The kubelet's reads of its own Node: by name, and as a list or watch by metadata.name.
    for path in [
        "/api/v1/nodes/node-0?resourceVersion=0",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-0&resourceVersion=0",
    ] {
        let via = get(&stack.addr(), path).await;
        let direct = get(&stack.upstream(), path).await;
        assert_eq!((via.status, &via.body), (200, &direct.body), "{path}");
    }
    assert_eq!(stack.served_from("cache").await, 2, "from the node's own cache");
    // Another node, one ConfigMap, one Secret: each passes through and starts nothing (a cache
    // of every node, ConfigMap or Secret would cost the upstream far more than these reads).
    for path in [
        "/api/v1/nodes/node-1?resourceVersion=0",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-1&resourceVersion=0",
        "/api/v1/namespaces/team-0/configmaps/config-0?resourceVersion=0",
        "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dconfig-0&resourceVersion=0",
        "/api/v1/namespaces/team-0/secrets?fieldSelector=metadata.name%3Dnone&resourceVersion=0",
    ] {
        let via = get(&stack.addr(), path).await;
        let direct = get(&stack.upstream(), path).await;
        assert_eq!((via.status, &via.body), (200, &direct.body), "{path}");
    }
    let watch = "/api/v1/namespaces/team-0/configmaps?watch=1&fieldSelector=metadata.name%3Dconfig-0&resourceVersion=0&timeoutSeconds=1";
    let mut w = support::watch(&stack.addr(), watch, "application/json").await;
    let first = w.next_within(Duration::from_secs(5)).await.expect("the configmap");
    assert_eq!(first["object"]["metadata"]["name"], "config-0");
    assert_eq!(stack.served_from("cache").await, 2, "none of these from a cache");
    let all = caches(&stack).await;
    assert_eq!(all.len(), 1, "only the configured cache runs: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_starts_a_cache_of_exactly_its_scope() {
    let stack = Stack::new(shape(), &[]).await;
    let narrow = "/api/v1/namespaces/team-0/pods?labelSelector=tier%3Dbackend&resourceVersion=0";
    let via = get(&stack.addr(), narrow).await;
    let direct = get(&stack.upstream(), narrow).await;
    assert_eq!((via.status, &via.body), (200, &direct.body));
    let all = synced_caches(&stack).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["namespace"], "team-0");
    assert_eq!(all[0]["label_selector"], "tier=backend");
    let backend_in_team0 = stack
        .sim
        .list("", "pods")
        .iter()
        .filter(|p| p["metadata"]["namespace"] == "team-0")
        .filter(|p| p["metadata"]["labels"]["tier"] == "backend")
        .count();
    assert_eq!(all[0]["objects"], backend_in_team0, "no more than the read could see");
    // A narrower read is within it; a wider one starts its own cache, never widening this one.
    let narrower =
        "/api/v1/namespaces/team-0/pods?labelSelector=tier%3D%3Dbackend%2Capp&resourceVersion=0";
    let via = get(&stack.addr(), narrower).await;
    assert_eq!(via.body, get(&stack.upstream(), narrower).await.body);
    assert_eq!(caches(&stack).await.len(), 1, "served by the running cache");
    // The first read, of exactly the scope it started, was passed through and fed the cache's
    // first load (`live::reflector::fed`); the narrower one was served from it.
    assert_eq!(stack.served_from("cache").await, 1);
    let wider = "/api/v1/namespaces/team-0/pods?resourceVersion=0";
    let via = get(&stack.addr(), wider).await;
    assert_eq!(via.body, get(&stack.upstream(), wider).await.body);
    let all = caches(&stack).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().any(|c| c["namespace"] == "team-0" && c["label_selector"].is_null()));
}

/// Declared scopes (`cacheScopes`, what the node configuration ships) cost nothing until read:
/// kubeplex lists nothing at start; the first read within one starts that cache — a named read
/// too, the kubelet's of its own Node — and later reads it contains, with other selectors, are
/// served by it rather than starting their own (a node's kubelet and kube-proxy share one cache
/// of services).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_scope_is_started_by_its_first_read_and_serves_every_read_it_contains() {
    let shape = ClusterShape { services: 12, ..shape() };
    let mut config = support::stack::default_caches(&[]);
    config.scopes = vec![
        "nodes:protobuf?fieldSelector=metadata.name=node-0".into(),
        "services:protobuf".into(),
    ];
    let stack = Stack::with_caches(kubeplex_sim::SimBuilder::new(), shape, config).await;
    let reads = |resource: &str| {
        stack.upstream_calls_of(resource, "LIST") + stack.upstream_calls_of(resource, "WATCH")
    };
    assert!(caches(&stack).await.is_empty(), "nothing cached before a read");
    assert_eq!((reads("nodes"), reads("services")), (0, 0), "nothing listed before a read");

    let headers = [("Accept", PROTOBUF)];
    let same = |path: &'static str| {
        let stack = &stack;
        async move {
            let via = request(&stack.addr(), http::Method::GET, path, &headers, None).await;
            let direct = request(&stack.upstream(), http::Method::GET, path, &headers, None).await;
            assert_eq!((via.status, &via.body), (200, &direct.body), "{path}");
        }
    };
    // The kubelet's read of its Node, by name: starts the declared cache.
    same("/api/v1/nodes/node-0?resourceVersion=0").await;
    // The kubelet's and kube-proxy's reads of services: one cache for both.
    same("/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone&resourceVersion=0").await;
    same("/api/v1/services?labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&resourceVersion=0").await;
    assert_eq!(stack.served_from("cache").await, 3);
    let all = caches(&stack).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().any(|c| c["field_selector"] == "metadata.name=node-0"));
    assert!(all.iter().any(|c| c["resource"] == "services/v1"
        && c["label_selector"].is_null()
        && c["field_selector"].is_null()));
    // The cache cost its first reader's list, and then its watch: two reads of services
    // upstream for the two readers (plus this test's two direct reads), not four.
    assert_eq!(reads("services"), 2 + 2);
    // A named read outside every declared scope still starts nothing.
    same("/api/v1/nodes/node-1?resourceVersion=0").await;
    assert_eq!(caches(&stack).await.len(), 2);
}

/// A read of one object by name within a declared scope whose cache is still loading (a pool's
/// cache of every ConfigMap, started by a kubelet's named watch of one; the real apiserver lists
/// 100,000 ConfigMaps in seconds and answers a read of one in milliseconds) passes through at
/// once rather than wait for the whole scope: the pod waiting for its volume gets its ConfigMap
/// as fast as directly, at the cost of that one read. Once loaded, the cache serves such reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_read_of_a_wide_scope_still_loading_passes_through_at_once() {
    let mut config = support::stack::default_caches(&[]);
    config.scopes = vec!["configmaps".into()];
    let stack = Stack::with_caches(kubeplex_sim::SimBuilder::new(), shape(), config).await;
    // Lists and watches of every ConfigMap take the fake 3 s; reads of one by name do not.
    stack.sim.slow_wide_reads("", "configmaps", Some(Duration::from_secs(3)));
    let named = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dconfig-0";
    // The kubelet's named watch (a WatchList, consistent) starts the scope's cache and streams
    // the ConfigMap and the end of its initial events while that cache is still loading.
    let watch = format!("{named}&watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30");
    let mut w = support::watch(&stack.addr(), &watch, "application/json").await;
    let first = w.next_within(Duration::from_secs(10)).await.expect("the configmap");
    assert_eq!(
        (first["type"].as_str(), first["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("config-0"))
    );
    let end = w.next_within(Duration::from_secs(10)).await.expect("initial events' end");
    assert_eq!(end["type"], "BOOKMARK");
    let all = caches(&stack).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["synced"], false, "answered before the scope's load ended: {all:?}");
    // A named get and list meanwhile: the apiserver's bytes, passed through at once too.
    for path in [
        "/api/v1/namespaces/team-0/configmaps/config-0?resourceVersion=0".to_string(),
        format!("{named}&resourceVersion=0"),
    ] {
        let via = get(&stack.addr(), &path).await;
        let direct = get(&stack.upstream(), &path).await;
        assert_eq!((via.status, &via.body), (200, &direct.body), "{path}");
    }
    assert_eq!(caches(&stack).await[0]["synced"], false);
    assert_eq!(stack.served_from("cache").await, 0);
    let passed = stack
        .metric_sum(
            "kubeplex_cache_sync_waits_total",
            &["resource=\"configmaps/v1\"", "result=\"named\""],
        )
        .await;
    assert_eq!(passed, 3, "each named read counted as passed through at once");
    // The scope's one list+watch, as before; once loaded it serves the named reads.
    let all = synced_caches(&stack).await;
    assert!(all[0]["namespace"].is_null() && all[0]["field_selector"].is_null(), "{all:?}");
    let path = format!("{named}&resourceVersion=0");
    let via = get(&stack.addr(), &path).await;
    assert_eq!((via.status, &via.body), (200, &get(&stack.upstream(), &path).await.body));
    assert_eq!(stack.served_from("cache").await, 1);
    let wide = |verb| stack.upstream_calls_of("configmaps", verb);
    // The cache's load, the watch and list passed through, and this test's two direct lists.
    assert_eq!((wide("WATCH"), wide("LIST")), (1 + 1, 1 + 2));
}
