//! Freshness through tiers (issue 21): a kubeplex in front of another kubeplex proves its reads
//! fresh with what it asks of that upstream — consistent `limit=1` lists, and short watches
//! with bookmarks whose final BOOKMARK must be at least the upstream's current RV — so the
//! serving tier answers those as the apiserver does, once it knows it holds that state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kubeplex::serve::Proxy;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_test_support as support;
use serde_json::{json, Value};
use support::stack::{default_caches, start_proxy, wait_ready, Stack};
use support::watchers::{
    apiserver_state, eventually, items_of, key_of, list_ok, settle, small_pod, Informer,
};
use support::*;

const CMS: &str = "/api/v1/namespaces/team-0/configmaps";
const SHAPE: ClusterShape =
    ClusterShape { nodes: 4, namespaces: 3, pods: 60, configmaps: 12, services: 3 };

/// A second kubeplex whose upstream is `tier`'s kubeplex, caching configmaps.
async fn in_front_of(tier: &Stack) -> Proxy {
    let proxy = start_proxy(&tier.write_client_kubeconfig(), default_caches(&["configmaps"])).await;
    wait_ready(&proxy).await;
    proxy
}

#[tokio::test]
async fn a_short_watch_with_bookmarks_ends_with_a_bookmark_at_the_upstreams_current_rv() {
    let stack = Stack::new(SHAPE, &["configmaps"]).await;
    let cached = get(&stack.addr(), &format!("{CMS}?resourceVersion=0")).await;
    let from = rv_of(&cached.json());
    let current = stack.move_cluster_on("probe");
    assert!(
        from < current,
        "configmaps are quiet: the cache is at {from}, the cluster at {current}"
    );
    // What another tier's probe asks: events after its RV, and a bookmark before the deadline.
    let path =
        format!("{CMS}?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=3");
    let started = Instant::now();
    let mut watch = watch(&stack.addr(), &path, "application/json").await;
    let mut last_bookmark = None;
    while let Some(event) = watch.next_within(Duration::from_secs(5)).await {
        if event["type"] == "BOOKMARK" {
            last_bookmark = Some((rv_of(&event["object"]), started.elapsed()));
        }
    }
    let (rv, at) = last_bookmark.expect("a bookmark before the deadline");
    assert!(rv >= current, "bookmark at {rv}, the upstream was at {current} when the watch began");
    assert!(at < Duration::from_secs(3), "the bookmark came {at:?} in, before the deadline");
    // Informers' watches (minutes) cost no proof: only this probe-like one was proven.
    let proofs = stack.metric_sum("kubeplex_freshness_proofs_total", &["read=\"bookmark\""]).await;
    assert_eq!(proofs, 1);
}

#[tokio::test]
async fn a_not_older_than_read_at_the_current_rv_through_two_tiers_is_the_apiservers() {
    let stack = Stack::new(SHAPE, &["configmaps"]).await;
    let second = in_front_of(&stack).await;
    let current = stack.move_cluster_on("tiers");
    let path = format!("{CMS}?resourceVersion={current}&resourceVersionMatch=NotOlderThan");
    let direct = get(&stack.upstream(), &path).await;
    assert_eq!(direct.status, 200);
    let started = Instant::now();
    let through = get(&second.addr.to_string(), &path).await;
    assert_eq!(through.status, 200, "{}", String::from_utf8_lossy(&through.body));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(rv_of(&through.json()) >= current);
    assert_eq!(through.json()["items"], direct.json()["items"]);
    // And a consistent read through both: the same items, at an RV at least the apiserver's.
    let consistent = get(&second.addr.to_string(), CMS).await;
    assert_eq!(consistent.status, 200);
    assert_eq!(consistent.json()["items"], direct.json()["items"]);
    assert!(rv_of(&consistent.json()) >= current);
}

/// What a consistent WatchList's events are: (type, name, RV), up to and including the first
/// event after the initial-events-end bookmark.
async fn watchlist_events(w: &mut Watch) -> Vec<(String, String, String)> {
    let mut events = Vec::new();
    let mut ended = false;
    loop {
        let e = w.next_within(Duration::from_secs(8)).await.expect("an event");
        let end = e["type"] == "BOOKMARK";
        events.push(ev(&e));
        if ended {
            return events;
        }
        ended |= end;
    }
}

/// A consistent WatchList's initial state is the state at the RV its proof established — the
/// apiserver's when the read arrived — so a change made while the proof runs comes after the
/// initial-events-end bookmark, as an event, exactly where the apiserver puts it (a tier in
/// front of this one relies on that split when it proves its own reads with such a watch).
#[tokio::test]
async fn a_consistent_watchlist_splits_state_and_events_where_the_apiserver_does() {
    // Enough configmaps, in the namespace and elsewhere, beside the few the watch selects that
    // the proof is a list and a probe (~2 s), not a reload or a metadata list.
    let stack = Stack::new(ClusterShape { configmaps: 300, ..SHAPE }, &["configmaps"]).await;
    stack.move_cluster_on("split");
    let path = format!(
        "{CMS}?labelSelector=app%3Dapp-3&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10"
    );
    let addr = stack.addr();
    let (ours_path, started) = (path.clone(), Instant::now());
    // Ours answers once its proof is done; the apiserver's at once.
    let ours = tokio::spawn(async move {
        let w = watch(&addr, &ours_path, "application/json").await;
        (w, started.elapsed())
    });
    let mut theirs = watch(&stack.upstream(), &path, "application/json").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "during-the-proof", "namespace": "team-0",
                "labels": {"app": "app-3"}}}))
        .expect("create");
    let created = started.elapsed();
    let (mut ours, answered) = ours.await.expect("our watch");
    assert!(answered > created, "the change came while the proof ran: {answered:?}, {created:?}");
    let want = watchlist_events(&mut theirs).await;
    let got = watchlist_events(&mut ours).await;
    assert_eq!(want.last().map(|e| e.1.as_str()), Some("during-the-proof"), "{want:?}");
    assert_eq!(got, want);
}

/// An informer's first list (resourceVersion=0) through a tier in front of another starts the
/// front tier's cache with a list of any state, as the informer would ask directly; the tier
/// behind answers that from its cache, so the apiserver gets no request for it (a consistent
/// load would have cost it the tier behind's freshness proof).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informers_first_list_through_two_tiers_costs_the_apiserver_nothing() {
    let stack = Stack::new(SHAPE, &["configmaps"]).await;
    wait_ready(&stack.proxy).await;
    let front = start_proxy(&stack.write_client_kubeconfig(), default_caches(&[])).await;
    wait_ready(&front).await;
    stack.move_cluster_on("any");
    let lists = stack.upstream_calls_of("configmaps", "LIST");
    let path = format!("{CMS}?resourceVersion=0");
    let via = get(&front.addr.to_string(), &path).await;
    assert_eq!(via.status, 200);
    assert_eq!(stack.upstream_calls_of("configmaps", "LIST"), lists, "no request upstream");
    let names = |v: &Value| -> Vec<String> {
        v["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].to_string()).collect()
    };
    assert_eq!(names(&via.json()), names(&get(&stack.upstream(), &path).await.json()));

    // A consistent read of the front's cache is still proven: a change made just before it is
    // in the answer.
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "after-any", "namespace": "team-0"}}))
        .expect("create");
    let consistent = get(&front.addr.to_string(), CMS).await;
    assert!(names(&consistent.json()).contains(&"\"after-any\"".to_string()));
}

/// A pool caching every pod, with 6 pods `{prefix}-0..5` on node-1, and a node tier in front
/// of it caching node-1's pods.
async fn node_tier_over_a_pool(prefix: &str) -> (Stack, Proxy) {
    let stack = Stack::new(SHAPE, &["pods:protobuf"]).await;
    wait_ready(&stack.proxy).await;
    for i in 0..6 {
        stack
            .sim
            .create(small_pod("team-0", &format!("{prefix}-{i}"), "a", "node-1"))
            .expect("pod");
    }
    let tier = start_proxy(
        &stack.write_client_kubeconfig(),
        default_caches(&["pods:protobuf?fieldSelector=spec.nodeName=node-1"]),
    )
    .await;
    wait_ready(&tier).await;
    (stack, tier)
}

/// Waits (20 s at most) until the pool has relisted since it had `relists`.
async fn relisted_since(stack: &Stack, relists: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while stack.metric_sum("kubeplex_relists_total", &[]).await == relists {
        assert!(Instant::now() < deadline, "the pool never relisted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The soak's lost deletions (BENCHMARKS.md, "Soak"): a node's pods deleted while the pool's
/// watch of the apiserver was down are found gone by the pool's relist. It sent each watcher
/// a DELETED for every vanished object, all at the list's RV (their own deletions' RVs are
/// unknown); a node tier watching the pool applied the first and dropped the others as "not
/// newer than the cache", so its kubelet kept running deleted pods. A client-go-like informer
/// on the node tier must come to hold exactly the apiserver's pods of its node, the watch
/// rules unbroken (no two events at one RV in a stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_the_pools_relist_found_gone_are_gone_from_a_node_tiers_watchers() {
    let (stack, tier) = node_tier_over_a_pool("gone").await;
    let kubelet = Arc::new(Informer::new(
        &tier.addr.to_string(),
        "/api/v1/pods",
        "fieldSelector=spec.nodeName%3Dnode-1",
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn({
        let kubelet = kubelet.clone();
        async move { kubelet.run(stopped).await }
    });
    let holds_gone =
        || async { kubelet.seen.lock().unwrap().objects.contains_key("team-0/gone-5") };
    assert!(eventually(Duration::from_secs(10), holds_gone).await, "the informer never synced");

    // The pool's watch breaks; three of the node's pods are deleted meanwhile, and the
    // apiserver comes back without the history: the pool relists and finds them gone.
    let relists = stack.metric_sum("kubeplex_relists_total", &[]).await;
    stack.sim.stop_serving();
    for i in 0..3 {
        stack.sim.delete("", "pods", "team-0", &format!("gone-{i}")).expect("delete");
    }
    stack.move_cluster_on("restart");
    stack.sim.compact();
    stack.sim.restart().await.expect("restart");
    relisted_since(&stack, relists).await;

    let settled = settle(&stack, std::slice::from_ref(&kubelet), Duration::from_secs(20)).await;
    let _ = stop.send(true);
    running.await.expect("informer");
    assert!(settled.converged && settled.problems.is_empty(), "{:?}", settled.problems);
    // And the tier's own view is the apiserver's.
    let path = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1";
    let cached = list_ok(&tier.addr.to_string(), &format!("{path}&resourceVersion=0")).await;
    assert_eq!(items_of(&cached.json()), apiserver_state(&stack, path).await);
}

/// The path of the deletions the real-agent soak of 2026-11-29 lost (issue 47): a pool's pods
/// cache relists after the apiserver restarted with its watch history gone (410), finding
/// writes its watch missed, while a node tier in front of it, caching its node's pods, goes on
/// watching the pool; pods of that node deleted a moment later must reach the node's watchers,
/// their deletion marked, then gone. (The soak's loss was the deletions the relist itself
/// found: the test above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_after_the_pool_relisted_reach_a_node_tiers_watchers() {
    const NODE_PODS: &str = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1";
    let (stack, tier) = node_tier_over_a_pool("before").await;
    let tier_addr = tier.addr.to_string();
    let rv = stack.sim.current_rv();
    let listed = get(&tier_addr, &format!("{NODE_PODS}&resourceVersion={rv}")).await;
    assert_eq!(listed.status, 200, "{}", String::from_utf8_lossy(&listed.body));
    let from = rv_of(&listed.json());
    let mut kubelet = watch(
        &tier_addr,
        &format!("{NODE_PODS}&watch=1&resourceVersion={from}&allowWatchBookmarks=true"),
        "application/json",
    )
    .await;
    assert_eq!(kubelet.status, 200);

    // The apiserver restarts with its watch history gone: the pool's watch resumes into a 410
    // and the pool relists, while the tier's watch of the pool stays open.
    let relists = stack.metric_sum("kubeplex_relists_total", &[]).await;
    stack
        .sim
        .modify("", "pods", "team-0", "before-0", |p| p["status"]["phase"] = json!("Succeeded"))
        .expect("status");
    stack.sim.stop_serving();
    // Writes the pool's watch missed (made as it broke): the relist finds them.
    for (name, node) in [("moved-a", "node-1"), ("moved-b", "node-2")] {
        stack.sim.create(small_pod("team-0", name, "a", node)).expect("pod");
    }
    stack
        .sim
        .modify("", "pods", "team-0", "before-5", |p| p["status"]["phase"] = json!("Failed"))
        .expect("status");
    // Other resources' writes moved etcd on; the restarted watch cache starts there.
    stack.move_cluster_on("restart");
    stack.sim.compact();
    stack.sim.restart().await.expect("restart");
    relisted_since(&stack, relists).await;

    // Then the node's pods are deleted, gracefully: marked, then gone.
    for i in 1..6 {
        let name = format!("before-{i}");
        stack
            .sim
            .modify("", "pods", "team-0", &name, |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-11-29T13:21:01Z");
                p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
            })
            .expect("mark");
        stack.sim.delete("", "pods", "team-0", &name).expect("delete");
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    let deleted = |seen: &[(String, String)]| seen.iter().filter(|(t, _)| t == "DELETED").count();
    while deleted(&seen) < 5 {
        let Some(e) = kubelet.next_within(Duration::from_secs(10)).await else { break };
        if e["type"] != "BOOKMARK" {
            seen.push((e["type"].as_str().unwrap_or("").to_string(), key_of(&e)));
        }
    }
    for i in 1..6 {
        let key = format!("team-0/before-{i}");
        let got: Vec<&str> =
            seen.iter().filter(|(_, k)| *k == key).map(|(t, _)| t.as_str()).collect();
        let got = &got[got.len().saturating_sub(2)..];
        assert_eq!(got, ["MODIFIED", "DELETED"], "{key}: {seen:?}");
    }
}
