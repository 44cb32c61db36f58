//! kubeplex in front of the fake apiserver: reads answered from the cache equal the apiserver's
//! own answers byte for byte; everything else passes through; one list+watch upstream.

mod support;

use http::Method;
use kubeplex::sim::seed::ClusterShape;
use kubeplex::sim::SimBuilder;
use serde_json::json;
use support::stack::Stack;
use support::*;

fn small() -> ClusterShape {
    ClusterShape { nodes: 4, namespaces: 3, pods: 60, configmaps: 12, services: 3 }
}

/// Asserts kubeplex answered `path` from its cache exactly as the apiserver answers it.
async fn assert_same(stack: &Stack, path: &str, accept: &str) -> Resp {
    let before = stack.served_from("cache").await;
    let ours = get_accept(&stack.addr(), path, accept).await;
    let theirs = get_accept(&stack.upstream(), path, accept).await;
    assert_eq!(
        stack.served_from("cache").await,
        before + 1,
        "{path} ({accept}) was not answered from the cache"
    );
    assert_eq!(ours.status, theirs.status, "{path}: status");
    assert_eq!(ours.header("content-type"), theirs.header("content-type"), "{path}: content type");
    assert_eq!(ours.header("cache-control"), "no-cache, private");
    assert!(
        ours.body == theirs.body,
        "{path} ({accept}): bodies differ\nkubeplex: {}\napiserver: {}",
        String::from_utf8_lossy(&ours.body[..ours.body.len().min(600)]),
        String::from_utf8_lossy(&theirs.body[..theirs.body.len().min(600)])
    );
    ours
}

const JSON: &str = "application/json";
const PB: &str = "application/vnd.kubernetes.protobuf";
const META: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

#[tokio::test]
async fn cached_lists_equal_the_apiservers_answers() {
    let stack = Stack::new(small(), &["pods", "pods:protobuf", "configmaps"]).await;
    for (path, accept) in [
        ("/api/v1/pods?resourceVersion=0", JSON),
        ("/api/v1/pods?resourceVersion=0", PB),
        ("/api/v1/pods?resourceVersion=0", META),
        ("/api/v1/namespaces/team-1/pods?resourceVersion=0", JSON),
        ("/api/v1/pods?resourceVersion=0&labelSelector=app%3Dapp-3", JSON),
        ("/api/v1/pods?resourceVersion=0&labelSelector=tier%20in%20(backend),app!%3Dapp-0", PB),
        ("/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1", JSON),
        ("/api/v1/namespaces/team-0/pods?resourceVersion=0&fieldSelector=metadata.name%3Dapp-3-00003", JSON),
        ("/api/v1/configmaps?resourceVersion=0", JSON),
    ] {
        assert_same(&stack, path, accept).await;
    }
    // Paging: every page, and its continue token, as the apiserver gives them.
    for accept in [JSON, PB] {
        let mut path = "/api/v1/pods?resourceVersion=0&limit=7".to_string();
        for page in 0.. {
            assert!(page < 20, "paging does not end");
            let resp = assert_same(&stack, &path, accept).await;
            let token = if accept == JSON {
                resp.json()["metadata"]["continue"].as_str().map(str::to_string)
            } else {
                let list = kubeplex::wire::proto::decode_list(&resp.body).expect("protobuf list");
                Some(list.meta.continue_token.to_string()).filter(|t| !t.is_empty())
            };
            match token {
                Some(t) => path = format!("/api/v1/pods?limit=7&continue={t}"),
                None => break,
            }
        }
    }
    // Gets at resourceVersion=0, present and absent.
    assert_same(&stack, "/api/v1/namespaces/team-0/pods/app-3-00003?resourceVersion=0", JSON).await;
    assert_same(&stack, "/api/v1/namespaces/team-0/pods/app-3-00003?resourceVersion=0", PB).await;
    assert_same(&stack, "/api/v1/namespaces/team-0/pods/nope?resourceVersion=0", JSON).await;
    // Exact and not-older-than at the current RV.
    let rv = stack.sim.current_rv();
    assert_same(
        &stack,
        &format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact"),
        JSON,
    )
    .await;
    assert_same(&stack, &format!("/api/v1/pods?resourceVersion={rv}"), JSON).await;
    // One node's pods at the latest state: the apiserver reads its spec.nodeName index, so a
    // page holding the node's last pod has no token though other pods follow in key order.
    let node = "fieldSelector=spec.nodeName%3Dnode-1";
    let all = assert_same(&stack, &format!("/api/v1/pods?resourceVersion=0&{node}"), JSON).await;
    let n = all.json()["items"].as_array().map_or(0, Vec::len);
    assert!(n > 2, "node-1 has pods");
    for limit in [1, n - 1, n] {
        let path = format!(
            "/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&limit={limit}&{node}"
        );
        let page = assert_same(&stack, &path, JSON).await;
        assert_eq!(page.json()["metadata"].get("continue").is_some(), limit < n, "{path}");
    }
    // Continued pages are at the token's RV, where the key range is walked.
    let mut path = format!(
        "/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&limit=4&{node}"
    );
    for page in 0.. {
        assert!(page < 20, "paging does not end");
        let resp = assert_same(&stack, &path, JSON).await;
        match resp.json()["metadata"]["continue"].as_str() {
            Some(t) => path = format!("/api/v1/pods?limit=4&{node}&continue={t}"),
            None => break,
        }
    }
}

#[tokio::test]
async fn a_node_list_reads_only_that_nodes_pods() {
    let stack = Stack::new(small(), &["pods"]).await;
    let node = assert_same(
        &stack,
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1",
        JSON,
    )
    .await;
    let on_node = node.json()["items"].as_array().map_or(0, Vec::len) as u64;
    assert_same(&stack, "/api/v1/pods?resourceVersion=0&labelSelector=app%3Dapp-3", JSON).await;
    let series = |name: &str, index: &str| format!(r#"{name}{{index="{index}",resource="pods"}}"#);
    let lists = "kubeplex_cache_list_total";
    let fetched = "kubeplex_cache_list_fetched_objects_total";
    assert_eq!(stack.metric(&series(lists, "spec.nodeName")).await, 1);
    assert_eq!(stack.metric(&series(fetched, "spec.nodeName")).await, on_node);
    // The label selector has no index: every pod was read.
    assert_eq!(stack.metric(&series(lists, "")).await, 1);
    assert_eq!(stack.metric(&series(fetched, "")).await, 60);
}

async fn fifty_clients(stack: Stack, lists: u64) {
    assert_eq!(stack.upstream_calls("LIST"), lists, "the cache's own list");
    assert_eq!(stack.upstream_calls("WATCH"), 1, "the cache's own watch");
    let addr = stack.addr();
    let clients: Vec<_> = (0..50)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move { get(&addr, "/api/v1/pods?resourceVersion=0").await })
        })
        .collect();
    let mut bodies = Vec::new();
    for c in clients {
        let r = tokio::time::timeout(STEP, c).await.expect("client").expect("join");
        assert_eq!(r.status, 200);
        bodies.push(r.body);
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "every client got the same list");
    assert_eq!(stack.upstream_calls("LIST"), lists, "no client's list reached the upstream");
    assert_eq!(stack.upstream_calls("WATCH"), 1, "one watch upstream");
}

#[tokio::test]
async fn fifty_concurrent_clients_cost_one_streaming_list_upstream() {
    // The streaming list is the watch: state, initial-events-end bookmark, then changes.
    fifty_clients(Stack::new(small(), &["pods"]).await, 0).await;
}

#[tokio::test]
async fn fifty_concurrent_clients_cost_one_list_and_one_watch_upstream() {
    // An apiserver without streaming lists: one paged list, then one watch.
    let config = kubeplex::sim::SimConfig { watch_list: false, ..Default::default() };
    fifty_clients(Stack::with_sim(SimBuilder::new().config(config), small(), &["pods"]).await, 1)
        .await;
}

#[tokio::test]
async fn the_cache_follows_changes_and_relists_after_compaction() {
    let stack = Stack::new(small(), &["configmaps"]).await;
    let addr = stack.addr();
    stack.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh", "namespace": "team-0"}, "data": {"a": "1"}})).expect("create");
    // Not-older-than the write: the cache waits until it has it, then answers.
    let rv = stack.sim.current_rv();
    let r = get(&addr, &format!("/api/v1/namespaces/team-0/configmaps/fresh?resourceVersion={rv}"))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"]["a"], "1");
    // Lose the watch and the history: the reflector relists and converges.
    stack.sim.compact();
    stack.sim.drop_watches();
    stack.sim.delete("", "configmaps", "team-0", "fresh").expect("delete");
    let rv = stack.sim.current_rv();
    let r = get(&addr, &format!("/api/v1/namespaces/team-0/configmaps/fresh?resourceVersion={rv}"))
        .await;
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
    assert_same(&stack, "/api/v1/configmaps?resourceVersion=0", JSON).await;
}

#[tokio::test]
async fn everything_else_passes_through_unchanged() {
    let stack = Stack::new(small(), &["configmaps"]).await;
    let addr = stack.addr();
    let before = stack.served_from("upstream").await;
    // Writes.
    let r = send_json(
        &addr,
        Method::POST,
        "/api/v1/namespaces/team-0/configmaps",
        &json!({"metadata": {"name": "via-proxy"}, "data": {}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let dup = send_json(
        &addr,
        Method::POST,
        "/api/v1/namespaces/team-0/configmaps",
        &json!({"metadata": {"name": "via-proxy"}, "data": {}}),
    )
    .await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.json()["reason"], "AlreadyExists");
    // Most-recent reads, Tables, malformed requests: the apiserver's answers.
    for (path, accept) in [
        ("/api/v1/namespaces/team-0/configmaps/via-proxy", JSON),
        ("/api/v1/configmaps?limit=5", JSON),
        ("/api/v1/configmaps?resourceVersion=0", "application/json;as=Table;v=v1;g=meta.k8s.io"),
        ("/api/v1/configmaps?resourceVersionMatch=Exact", JSON),
        ("/api/v1/configmaps?resourceVersion=0&labelSelector=a%20in%20(", JSON),
        ("/api/v1/nodes", JSON),
        ("/api", JSON),
    ] {
        let ours = get_accept(&addr, path, accept).await;
        let theirs = get_accept(&stack.upstream(), path, accept).await;
        assert_eq!(
            (ours.status, ours.header("content-type")),
            (theirs.status, theirs.header("content-type")),
            "{path}"
        );
        if !path.contains("Table") {
            assert_eq!(norm_bytes(&ours.json()), norm_bytes(&theirs.json()), "{path}");
        }
    }
    assert!(stack.served_from("upstream").await >= before + 9);
    // Watches stream through.
    let rv = stack.sim.current_rv();
    let mut w = watch(
        &addr,
        &format!("/api/v1/namespaces/team-0/configmaps?watch=1&resourceVersion={rv}"),
        JSON,
    )
    .await;
    stack.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched", "namespace": "team-0"}})).expect("create");
    assert_eq!(ev(&w.next().await).1, "watched");
}

#[tokio::test]
async fn large_lists_are_gzipped_once_per_state() {
    let stack = Stack::new(small(), &["configmaps"]).await;
    for i in 0..64 {
        stack.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i:02}"), "namespace": "team-0"}, "data": {"blob": "x".repeat(4096)}})).expect("create");
    }
    let rv = stack.sim.current_rv();
    let path = format!("/api/v1/configmaps?resourceVersion={rv}");
    let gz = [("Accept", JSON), ("Accept-Encoding", "gzip")];
    let first = request(&stack.addr(), Method::GET, &path, &gz, None).await;
    assert_eq!(
        (first.status, first.header("content-encoding"), first.header("vary")),
        (200, "gzip", "Accept-Encoding")
    );
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&first.body[..]), &mut plain)
        .expect("gunzip");
    let theirs = get(&stack.upstream(), &path).await;
    assert_eq!(plain, theirs.body.to_vec(), "the compressed list is the apiserver's list");
    let second =
        request(&stack.addr(), Method::GET, "/api/v1/configmaps?resourceVersion=0", &gz, None)
            .await;
    let third =
        request(&stack.addr(), Method::GET, "/api/v1/configmaps?resourceVersion=0", &gz, None)
            .await;
    assert_eq!(second.body, third.body);
    let admin = stack.proxy.admin_addr.expect("admin").to_string();
    let metrics = String::from_utf8_lossy(&get(&admin, "/metrics").await.body).into_owned();
    assert!(metrics.contains("kubeplex_page_cache_total{result=\"hit\"} 1"), "{metrics}");
}
