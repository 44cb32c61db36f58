//! kubeplex in front of the fake apiserver: reads answered from the cache equal the apiserver's
//! own answers byte for byte; everything else passes through; one list+watch upstream.

use kubeplex_test_support as support;
use support::shapes;

use http::Method;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use serde_json::json;
use support::stack::Stack;
use support::*;

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
const META_PB: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// A group-version's discovery document is answered with kubeplex's own copy of it (the one it
/// learns resources from), byte for byte; one the apiserver does not serve goes upstream.
#[tokio::test]
async fn discovery_documents_equal_the_apiservers() {
    let stack = Stack::new(shapes::SMALL, &["pods", "configmaps"]).await;
    for accept in [JSON, "*/*", "application/json, */*", "application/yaml;q=0.5, application/json"]
    {
        assert_same(&stack, "/api/v1", accept).await;
    }
    assert_same(&stack, "/apis/discovery.k8s.io/v1", JSON).await;
    // YAML, and curl's User-Agent (which the apiserver answers indented), go upstream.
    let before = stack.served_from("cache").await;
    let yaml = get_accept(&stack.addr(), "/api/v1", "application/yaml").await;
    assert_eq!(yaml.body, get_accept(&stack.upstream(), "/api/v1", "application/yaml").await.body);
    let curl = [("Accept", JSON), ("User-Agent", "curl/8.5.0")];
    let ours = request(&stack.addr(), Method::GET, "/api/v1", &curl, None).await;
    let theirs = request(&stack.upstream(), Method::GET, "/api/v1", &curl, None).await;
    assert_eq!((ours.status, ours.body), (theirs.status, theirs.body));
    assert_eq!(stack.served_from("cache").await, before, "passed through");
    let before = stack.served_from("cache").await;
    let ours = get_accept(&stack.addr(), "/apis/made-up.example.com/v1", JSON).await;
    let theirs = get_accept(&stack.upstream(), "/apis/made-up.example.com/v1", JSON).await;
    assert_eq!((ours.status, ours.body), (theirs.status, theirs.body));
    assert_eq!(stack.served_from("cache").await, before, "passed through");
}

#[tokio::test]
async fn cached_lists_equal_the_apiservers_answers() {
    let stack = Stack::new(shapes::SMALL, &["pods", "pods:protobuf", "configmaps"]).await;
    for (path, accept) in [
        ("/api/v1/pods?resourceVersion=0", JSON),
        ("/api/v1/pods?resourceVersion=0", PB),
        ("/api/v1/pods?resourceVersion=0", META),
        ("/api/v1/pods?resourceVersion=0", META_PB),
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
    let stack = Stack::new(shapes::SMALL, &["pods"]).await;
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
    // Through two tiers (KUBEPLEX_TEST_TIERS=2) the apiserver also sees the pool tier prove
    // the front tier's consistent load: a `limit=1` list.
    let lists = lists + (support::stack::tiers() as u64 - 1);
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
    fifty_clients(Stack::new(shapes::SMALL, &["pods"]).await, 0).await;
}

#[tokio::test]
async fn fifty_concurrent_clients_cost_one_list_and_one_watch_upstream() {
    // An apiserver without streaming lists: one paged list, then one watch.
    let config = kubeplex_sim::SimConfig { watch_list: false, ..Default::default() };
    fifty_clients(
        Stack::with_sim(SimBuilder::new().config(config), shapes::SMALL, &["pods"]).await,
        1,
    )
    .await;
}

#[tokio::test]
async fn the_cache_follows_changes_and_relists_after_compaction() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
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
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
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
    // Most-recent gets (consistent lists are proven and served: tests/proxy/proxy_freshness.rs),
    // Tables, malformed requests, discovery: the apiserver's answers.
    for (path, accept) in [
        ("/api/v1/namespaces/team-0/configmaps/via-proxy", JSON),
        ("/api/v1/nodes/node-0", JSON),
        // A Table the cache could print, but with includeObject's 400 for the apiserver to word.
        (
            "/api/v1/configmaps?resourceVersion=0&includeObject=All",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        ),
        ("/api/v1/configmaps?resourceVersionMatch=Exact", JSON),
        ("/api/v1/configmaps?resourceVersion=0&labelSelector=a%20in%20(", JSON),
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
    assert!(stack.served_from("upstream").await >= before + 8);
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
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
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
    let metrics = stack.metrics_text().await;
    assert!(metrics.contains("kubeplex_page_cache_total{result=\"hit\"} 1"), "{metrics}");
    let kept: usize = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kubeplex_page_cache_bytes "))
        .and_then(|v| v.parse().ok())
        .expect("kubeplex_page_cache_bytes");
    assert!(kept > first.body.len(), "the page and its key: {kept} bytes");
}

#[tokio::test]
async fn caches_start_on_first_use_and_stop_when_idle() {
    let stack =
        Stack::build(SimBuilder::new(), shapes::SMALL, &[], std::time::Duration::from_millis(600))
            .await;
    let addr = stack.addr();
    assert_eq!(stack.proxy.state.caches.len(), 0);
    // The first cacheable read starts the cache and is passed through (never waits on it).
    let first = get(&addr, "/api/v1/configmaps?resourceVersion=0").await;
    assert_eq!(first.status, 200);
    assert_eq!(stack.proxy.state.caches.len(), 1);
    let mut served = false;
    for _ in 0..100 {
        let before = stack.served_from("cache").await;
        get(&addr, "/api/v1/configmaps?resourceVersion=0").await;
        if stack.served_from("cache").await > before {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(served, "once synced, the cache answers");
    // Unread, it stops, and its upstream watch with it.
    for _ in 0..100 {
        if stack.proxy.state.caches.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(stack.proxy.state.caches.is_empty(), "idle cache stopped");
    let open_watches = stack
        .sim
        .metrics_text()
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{") && l.contains("configmaps"))
        .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
        .collect::<Vec<_>>();
    for _ in 0..100 {
        let text = stack.sim.metrics_text();
        if text
            .lines()
            .filter(|l| {
                l.starts_with("apiserver_longrunning_requests{") && l.contains("configmaps")
            })
            .all(|l| l.ends_with(" 0"))
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the upstream watch stayed open: {open_watches:?}");
}

#[tokio::test]
async fn identities_and_most_recent_reads_never_touch_the_cache() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    let addr = stack.addr();
    let before = stack.served_from("cache").await;
    // Impersonation is for the apiserver to authorize.
    let r = request(
        &addr,
        Method::GET,
        "/api/v1/configmaps?resourceVersion=0",
        &[("Accept", JSON), ("Impersonate-User", "someone")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        stack.served_from("cache").await,
        before,
        "an impersonating client was served from the cache"
    );
    // A most-recent read of another resource neither uses nor starts a cache.
    let caches = stack.proxy.state.caches.len();
    assert_eq!(get(&addr, "/api/v1/namespaces/team-0/services/svc-0").await.status, 200);
    assert_eq!(
        stack.proxy.state.caches.len(),
        caches,
        "a cache was started for a read it cannot answer"
    );
    // Paths are never metric label values unless discovery knows the resource.
    assert_eq!(get(&addr, "/apis/made.up.example/v1/namespaces/x/zzzrandomzzz").await.status, 404);
    let metrics = stack.metrics_text().await;
    assert!(!metrics.contains("zzzrandomzzz"), "{metrics}");
    assert!(metrics.contains("resource=\"other\""));
}

#[tokio::test]
async fn the_reflector_honours_retry_after_and_tokens_stay_consistent() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    let addr = stack.addr();
    // A continue token from before what follows.
    let p1 = get(&stack.upstream(), "/api/v1/configmaps?limit=2").await.json();
    let token = p1["metadata"]["continue"].as_str().expect("token").to_string();
    let page2 = format!("/api/v1/configmaps?limit=2&continue={token}");
    let expected = get(&stack.upstream(), &page2).await;
    assert_eq!(expected.status, 200);
    stack.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bump", "namespace": "team-0"}})).expect("create");
    // The upstream sheds load: the cache's next relist is refused twice with Retry-After: 1.
    stack.sim.throttle(2, 1);
    stack.sim.compact();
    stack.sim.drop_watches();
    let started = std::time::Instant::now();
    stack.sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "team-0"}})).expect("create");
    let rv = stack.sim.current_rv();
    // Not older than the write: kubeplex waits for its cache, which may only relist after the
    // upstream's Retry-After; either way the client gets the object.
    let mut found = false;
    for _ in 0..100 {
        let r =
            get(&addr, &format!("/api/v1/namespaces/team-0/configmaps/late?resourceVersion={rv}"))
                .await;
        if r.status == 200 {
            found = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(found, "the cache recovered after being throttled");
    let throttled = stack.sim.metrics_text().lines().filter(|l| l.contains("code=\"429\"")).count();
    assert!(throttled >= 1, "the upstream did throttle");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900), "Retry-After was honoured");
    // The upstream has compacted the token's revision away, but kubeplex's cache still holds
    // that state: it answers the next page consistently (the page the upstream gave before),
    // as the apiserver's own watch cache does from its snapshots.
    assert_eq!(get(&stack.upstream(), &page2).await.status, 410, "compacted upstream");
    let ours = get(&addr, &page2).await;
    assert_eq!((ours.status, ours.body.clone()), (expected.status, expected.body.clone()));
}

#[tokio::test]
async fn a_future_resource_version_gets_the_apiservers_504_after_about_three_seconds() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    let path = "/api/v1/configmaps?resourceVersion=999999999&resourceVersionMatch=NotOlderThan";
    let started = std::time::Instant::now();
    let ours = get(&stack.addr(), path).await;
    let waited = started.elapsed();
    let theirs = get(&stack.upstream(), path).await;
    assert_eq!(ours.status, 504);
    assert_eq!(ours.header("retry-after"), "1");
    assert_eq!(ours.body, theirs.body, "the same Status, current RV included");
    assert!(
        waited >= std::time::Duration::from_millis(2900)
            && waited < std::time::Duration::from_millis(5000),
        "answered after {waited:?}"
    );
}

/// A large list is written from the cached items' own buffers (not assembled first): the bytes
/// are still the apiserver's, with the length announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_lists_are_streamed_byte_for_byte() {
    let shape = ClusterShape { nodes: 4, namespaces: 2, pods: 200, configmaps: 2, services: 1 };
    let stack = Stack::new(shape, &["pods", "pods:protobuf"]).await;
    for accept in ["application/json", "application/vnd.kubernetes.protobuf"] {
        let resp = assert_same(&stack, "/api/v1/pods?resourceVersion=0", accept).await;
        assert!(resp.body.len() > 256 * 1024, "{accept}: {} bytes", resp.body.len());
        assert_eq!(resp.header("content-length"), resp.body.len().to_string(), "{accept}");
    }
}
