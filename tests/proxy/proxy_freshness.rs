//! Reads the cache can answer once it is synced or shown fresh (issue 10): cold starts share the
//! cache's one upstream load instead of passing through, and consistent and not-older-than reads
//! of a quiet resource are proven current (a `limit=1` list and a bookmark probe, which the fake
//! apiserver answers with kube-apiserver 1.36's bookmark rules) and answered from the cache.

use kubeplex_test_support as support;
use support::shapes;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use kubeplex::cache::fanout::WatchConfig;
use kubeplex::live::caches::FreshnessConfig;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use serde_json::{json, Value};
use support::stack::Stack;
use support::*;

const JSON: &str = "application/json";
const PB: &str = "application/vnd.kubernetes.protobuf";
/// A proof's bound in these tests: the probe's bookmark comes 1–2 s in (measured 1.6–1.95 s in
/// all), with room for a loaded 2-core CI machine; a read that had to wait out the 3 s budget
/// and pass through would take longer.
const PROVEN_WITHIN: Duration = Duration::from_millis(2600);
const CMS: &str = "/api/v1/namespaces/team-0/configmaps";

async fn wait_synced(stack: &Stack, resource: &str) {
    for _ in 0..200 {
        if stack.metric_sum("kubeplex_cache_objects", &[&format!("resource=\"{resource}")]).await
            > 0
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the {resource} cache never synced");
}

/// 50 reads of a cold cache at once cost the upstream one load: the first one's own list,
/// passed through — its answer is the cache's first load (`live::reflector::fed`), so that
/// reader waits no longer than directly — and the watch after it; the other 49 wait for that
/// load and are answered from the cache, every answer the apiserver's.
#[tokio::test]
async fn fifty_cold_lists_share_the_caches_one_upstream_load() {
    let stack = Stack::new(shapes::SMALL, &[]).await;
    let addr = stack.addr();
    let path = "/api/v1/configmaps?resourceVersion=0";
    let answers = join_all((0..50).map(|_| get_accept(&addr, path, JSON))).await;
    let (lists, watches) = (
        stack.upstream_calls_of("configmaps", "LIST"),
        stack.upstream_calls_of("configmaps", "WATCH"),
    );
    let direct = get_accept(&stack.upstream(), path, JSON).await;
    for a in &answers {
        assert_eq!(a.status, 200);
        assert!(a.body == direct.body, "a cold list differs from the apiserver's");
    }
    assert_eq!((lists, watches), (1, 1), "one upstream load for 50 cold lists");
    let loads = |verb: &'static str| {
        let stack = &stack;
        async move {
            let verb = format!("verb=\"{verb}\"");
            stack
                .metric_sum("kubeplex_upstream_calls_total", &["resource=\"configmaps", &verb])
                .await
        }
    };
    assert_eq!((loads("reader_list").await, loads("list").await), (1, 0), "the first read's");
    assert_eq!(stack.served_from("upstream").await, 1, "the first read passed through");
    assert_eq!(stack.served_from("cache").await, 49);
    let waited = stack.metric_sum("kubeplex_cache_sync_waits_total", &["result=\"synced\""]).await;
    assert!(waited >= 1, "the cold reads waited for the sync ({waited})");
    assert_eq!(
        stack.metric_sum("kubeplex_cache_sync_waits_total", &["result=\"timeout\""]).await,
        0
    );
}

#[tokio::test]
async fn two_hundred_cold_watchers_share_the_caches_one_upstream_watch() {
    let stack = Stack::new(shapes::SMALL, &[]).await;
    let addr = stack.addr();
    // Half start from the state at resourceVersion=0, half with a consistent WatchList (what
    // client-go ≥ 1.35 sends): both are answered from the cache's first load.
    let paths: Vec<String> = (0..200)
        .map(|i| {
            if i % 2 == 0 {
                format!("{CMS}?watch=1&resourceVersion=0&timeoutSeconds=20")
            } else {
                format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=20")
            }
        })
        .collect();
    let mut watchers = join_all(paths.iter().map(|p| watch(&addr, p, JSON))).await;
    // One upstream watch: the cache's streaming list. WatchLists that arrived after it was
    // requested share one consistent-RV list (a LIST of one item), and need no probe when
    // nothing moved.
    let watches = stack.upstream_calls_of("configmaps", "WATCH");
    let lists = stack.upstream_calls_of("configmaps", "LIST");
    let state = get_accept(&stack.upstream(), CMS, JSON).await.json();
    let names: Vec<String> = state["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    let list_rv = rv_of(&state);
    for (i, w) in watchers.iter_mut().enumerate() {
        assert_eq!(w.status, 200);
        let mut got = Vec::new();
        for _ in 0..names.len() {
            let e = w.next().await;
            assert_eq!(e["type"], "ADDED", "watcher {i}");
            got.push(ev(&e).1);
        }
        assert_eq!(got, names, "watcher {i}: the state in key order");
        if i % 2 == 1 {
            let end = w.next().await;
            assert_eq!(end["type"], "BOOKMARK");
            assert_eq!(
                end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            assert!(rv_of(&end) >= list_rv, "the WatchList's state is consistent");
        }
    }
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "after", "namespace": "team-0"}}))
        .expect("create");
    for w in &mut watchers {
        assert_eq!(ev(&w.next().await).1, "after");
    }
    assert_eq!(watches, 1, "one upstream watch (the streaming list) for 200 cold watchers");
    // WatchLists that arrived after the load was requested share a consistent-RV list; one is in
    // flight at a time and the next gathers every reader that arrived meanwhile, so a burst
    // of connections costs a few at most, never one per watcher.
    assert!(lists <= 3, "a few shared consistent-RV lists at most ({lists})");
    assert_eq!(stack.served_from("upstream").await, 0, "none passed through");
    let proofs = |p: &'static str| {
        let stack = &stack;
        async move {
            stack.metric_sum("kubeplex_freshness_proofs_total", &[&format!("proof=\"{p}\"")]).await
        }
    };
    assert_eq!(proofs("timeout").await, 0);
    assert_eq!(
        proofs("load").await + proofs("cache").await + proofs("listed").await,
        100,
        "every WatchList shown consistent by the load it waited for, or a shared list"
    );
}

/// kubeplex with every consistent list worth a probe (the default spares lists under 1 MiB),
/// and enough configmaps that a metadata list of the cache, or of a namespace, would cost more
/// than a list of a few of one namespace's ([`FEW`]) directly: the proof is a list and a probe.
async fn probing_every_list() -> Stack {
    let freshness = FreshnessConfig { probe_min_list_bytes: 0, ..FreshnessConfig::default() };
    let (idle, watch) = (Duration::from_secs(600), WatchConfig::default());
    let shape = ClusterShape { configmaps: 300, ..shapes::SMALL };
    Stack::build_full(SimBuilder::new(), shape, &["configmaps"], idle, watch, freshness).await
}

/// A list of a few of team-0's ConfigMaps (4 of its ~100, by label): small beside the cache
/// and beside its namespace.
const FEW: &str = "/api/v1/namespaces/team-0/configmaps?labelSelector=app%3Dapp-3";

#[tokio::test]
async fn a_consistent_list_of_a_quiet_resource_is_proven_and_served_from_the_cache() {
    let stack = probing_every_list().await;
    wait_synced(&stack, "configmaps").await;
    let current = stack.move_cluster_on("quiet");
    let lists_before = stack.upstream_calls_of("configmaps", "LIST");
    let watches_before = stack.upstream_calls_of("configmaps", "WATCH");
    let cache_before = stack.served_from("cache").await;

    let started = Instant::now();
    let ours = get_accept(&stack.addr(), FEW, JSON).await;
    let took = started.elapsed();
    // The proof's own calls: one limit=1 list and one short probe watch.
    assert_eq!(stack.upstream_calls_of("configmaps", "LIST") - lists_before, 1);
    assert_eq!(stack.upstream_calls_of("configmaps", "WATCH") - watches_before, 1);
    let theirs = get_accept(&stack.upstream(), FEW, JSON).await;
    assert_eq!(ours.status, 200);
    assert_eq!(rv_of(&ours.json()), current, "the state at the upstream's current RV");
    assert!(ours.body == theirs.body, "the consistent list equals the apiserver's");
    assert_eq!(stack.served_from("cache").await, cache_before + 1, "answered from the cache");
    assert!(took < PROVEN_WITHIN, "proven within ~2 s: took {took:?}");
    println!("consistent list of a quiet resource answered in {took:?}");
    assert_eq!(
        stack
            .metric_sum(
                "kubeplex_freshness_proofs_total",
                &["read=\"consistent\"", "proof=\"probe\""]
            )
            .await,
        1
    );

    // Proven once, the cache stays current while nothing moves: the next consistent read
    // needs only the one-item list.
    let again = get_accept(&stack.addr(), FEW, JSON).await;
    assert!(again.body == theirs.body);
    assert_eq!(stack.upstream_calls_of("configmaps", "WATCH") - watches_before, 1, "no new probe");
}

#[tokio::test]
async fn a_consistent_watchlist_of_a_quiet_resource_is_served_from_the_cache() {
    // Enough configmaps in the other namespaces that reloading the cache would cost more than
    // this read of one namespace directly: the proof is a metadata list of the namespace.
    let shape = ClusterShape { configmaps: 300, ..shapes::SMALL };
    let stack = Stack::new(shape, &["configmaps"]).await;
    wait_synced(&stack, "configmaps").await;
    let current = stack.move_cluster_on("wl");
    let path = format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10");
    let cache_before = stack.served_from("cache").await;
    let started = Instant::now();
    let mut ours = watch(&stack.addr(), &path, JSON).await;
    let mut theirs = watch(&stack.upstream(), &path, JSON).await;
    let mut got = Vec::new();
    let mut want = Vec::new();
    loop {
        let line = ours.next_line_within(Duration::from_secs(5)).await.expect("event");
        let end = line.windows(10).any(|w| w == b"\"BOOKMARK\"");
        got.push(line);
        if end {
            break;
        }
    }
    let took = started.elapsed();
    while want.len() < got.len() {
        want.push(theirs.next_line_within(Duration::from_secs(5)).await.expect("event"));
    }
    assert_eq!(got, want, "the state and the initial-events-end bookmark, byte for byte");
    let end: Value = serde_json::from_slice(got.last().expect("end")).expect("json");
    assert_eq!(rv_of(&end), current);
    assert!(took < PROVEN_WITHIN, "proven within ~2 s: took {took:?}");
    assert_eq!(stack.served_from("cache").await, cache_before + 1, "answered from the cache");
    // Then it carries changes like any watch.
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "later", "namespace": "team-0"}}))
        .expect("create");
    assert_eq!(ev(&ours.next().await), ev(&theirs.next().await));
}

/// The rule for small lists: a consistent list that would need a probe of its own, whose
/// objects come to less than 1 MiB and whose cache and namespace hold much more than it (so
/// that a metadata list of either would cost more than the list), passes through
/// (milliseconds, and cheaper for the upstream than a probe); once a probe is under way, or the
/// cache is current, it is served.
#[tokio::test]
async fn a_small_quiet_consistent_list_passes_through_unless_the_cache_is_shown_current() {
    // The cache holds 300 configmaps, team-0 ~100, the list 4 of them: a metadata list of the
    // cache or of the namespace would cost more than the list directly.
    let stack =
        Stack::new(ClusterShape { configmaps: 300, ..shapes::SMALL }, &["configmaps"]).await;
    wait_synced(&stack, "configmaps").await;
    stack.move_cluster_on("small");
    let watches_before = stack.upstream_calls_of("configmaps", "WATCH");
    let (cache_before, upstream_before) =
        (stack.served_from("cache").await, stack.served_from("upstream").await);
    let started = Instant::now();
    let ours = get_accept(&stack.addr(), FEW, JSON).await;
    let took = started.elapsed();
    let theirs = get_accept(&stack.upstream(), FEW, JSON).await;
    assert!(ours.body == theirs.body);
    assert_eq!(stack.served_from("upstream").await, upstream_before + 1, "passed through");
    assert_eq!(stack.served_from("cache").await, cache_before);
    assert!(took < Duration::from_millis(500), "no probe waited for: {took:?}");
    assert_eq!(stack.upstream_calls_of("configmaps", "WATCH"), watches_before, "no probe");
    assert_eq!(
        stack.metric_sum("kubeplex_freshness_proofs_total", &["proof=\"declined\""]).await,
        1
    );
    // A WatchList proves the cache (its probe is always worth it); then the same small list,
    // with nothing moved since, is answered from the cache.
    let path = format!("{FEW}&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5");
    let mut w = watch(&stack.addr(), &path, JSON).await;
    while w.next().await["type"] != "BOOKMARK" {}
    let again = get_accept(&stack.addr(), FEW, JSON).await;
    assert!(again.body == theirs.body);
    assert_eq!(stack.served_from("cache").await, cache_before + 2, "the WatchList and the list");
}

/// The apiserver's LISTs of one namespace's `resource` (its `scope="namespace"` requests).
fn namespace_lists_of(stack: &Stack, resource: &str) -> u64 {
    let metrics = stack.sim.metrics_text();
    let lists = metrics.lines().filter(|l| {
        l.starts_with("apiserver_request_total{code=\"200\"")
            && l.contains(&format!("resource=\"{resource}\""))
            && l.contains("scope=\"namespace\"")
            && l.contains("verb=\"LIST\"")
    });
    lists.filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
}

/// The apiserver's LISTs of `resource` in every namespace (its `scope="cluster"` requests).
fn cluster_lists_of(stack: &Stack, resource: &str) -> u64 {
    let metrics = stack.sim.metrics_text();
    let lists = metrics.lines().filter(|l| {
        l.starts_with("apiserver_request_total{code=\"200\"")
            && l.contains(&format!("resource=\"{resource}\""))
            && l.contains("scope=\"cluster\"")
            && l.contains("verb=\"LIST\"")
    });
    lists.filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
}

/// A consistent list of about all of a small quiet cache — another tier's `limit=1` list for
/// the upstream's current RV, a node's list of its Node — is answered from the cache at the
/// upstream's current RV, proven by one metadata list of the cache: what the apiserver answers,
/// byte for byte, where passing it through would have cost the apiserver a request per read
/// (and a current-RV list besides). The lists that arrive together share the one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_list_of_a_small_quiet_cache_is_served_at_the_current_rv_after_one_metadata_list(
) {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    wait_synced(&stack, "configmaps").await;
    let current = stack.move_cluster_on("listed");
    let meta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let lists_before = stack.upstream_calls_of("configmaps", "LIST");
    let (cache_before, upstream_before) =
        (stack.served_from("cache").await, stack.served_from("upstream").await);
    // A tier's clock list (metadata, one item) and two agents' lists, arriving together.
    let reads = [
        ("/api/v1/configmaps?limit=1", meta),
        ("/api/v1/configmaps", JSON),
        ("/api/v1/configmaps?limit=5", JSON),
    ];
    let addr = stack.addr();
    let started = Instant::now();
    let ours = join_all(reads.iter().map(|(path, accept)| get_accept(&addr, path, accept))).await;
    let took = started.elapsed();
    assert_eq!(
        stack.upstream_calls_of("configmaps", "LIST") - lists_before,
        1,
        "one metadata list"
    );
    assert_eq!(stack.served_from("cache").await - cache_before, 3, "all three from the cache");
    assert_eq!(stack.served_from("upstream").await, upstream_before, "none passed through");
    assert!(took < Duration::from_millis(800), "at once, no probe: {took:?}");
    for ((path, accept), ours) in reads.iter().zip(&ours) {
        let theirs = get_accept(&stack.upstream(), path, accept).await;
        assert_eq!(ours.status, 200);
        assert_eq!(rv_of(&ours.json()), current, "{path}: at the upstream's current RV");
        assert!(ours.body == theirs.body, "{path}: the apiserver's list, byte for byte");
    }
    // The next page of the limited list, at that RV, from the cache too.
    let first = ours[2].json();
    let token = first["metadata"]["continue"].as_str().expect("continue").to_string();
    let next = format!("/api/v1/configmaps?limit=5&continue={token}");
    let (ours, theirs) = (
        get_accept(&stack.addr(), &next, JSON).await,
        get_accept(&stack.upstream(), &next, JSON).await,
    );
    assert!(ours.body == theirs.body, "the next page, byte for byte");
    // A change after it is in the next consistent list.
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "after-listed", "namespace": "team-0"}}))
        .expect("create");
    let again = get_accept(&stack.addr(), "/api/v1/configmaps", JSON).await.json();
    let items = again["items"].as_array().expect("items");
    assert!(items.iter().any(|o| o["metadata"]["name"] == "after-listed"), "the change is in it");
}

#[tokio::test]
async fn a_write_during_the_proof_is_either_in_the_answer_or_after_it() {
    let stack = probing_every_list().await;
    wait_synced(&stack, "configmaps").await;
    for round in 0..3 {
        stack.move_cluster_on(&format!("w{round}"));
        let addr = stack.addr();
        let read = tokio::spawn(async move { get_accept(&addr, CMS, JSON).await });
        tokio::time::sleep(Duration::from_millis(300 * round + 100)).await;
        stack
            .sim
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("during-{round}"), "namespace": "team-0"}}))
            .expect("create");
        let ours = read.await.expect("read");
        assert_eq!(ours.status, 200);
        let list = ours.json();
        // Whatever RV it is at, it is exactly the apiserver's state at that RV.
        let exact = get_accept(
            &stack.upstream(),
            &format!("{CMS}?resourceVersion={}&resourceVersionMatch=Exact", rv_of(&list)),
            JSON,
        )
        .await;
        assert_eq!(norm_bytes(&list), norm_bytes(&exact.json()), "round {round}");
    }
}

#[tokio::test]
async fn not_older_than_an_rv_from_another_resource_is_served_from_the_cache() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    wait_synced(&stack, "configmaps").await;
    let name = get_accept(&stack.upstream(), CMS, JSON).await.json()["items"][0]["metadata"]
        ["name"]
        .as_str()
        .expect("a configmap")
        .to_string();
    for (i, path) in [
        "{CMS}?resourceVersion={RV}&resourceVersionMatch=NotOlderThan",
        "{CMS}?resourceVersion={RV}",
        "{CMS}/{NAME}?resourceVersion={RV}",
    ]
    .iter()
    .enumerate()
    {
        // Each read with an RV the cluster reached through another resource.
        let other = stack.move_cluster_on(&format!("nt{i}"));
        let path =
            path.replace("{CMS}", CMS).replace("{RV}", &other.to_string()).replace("{NAME}", &name);
        let cache_before = stack.served_from("cache").await;
        let started = Instant::now();
        let ours = get_accept(&stack.addr(), &path, JSON).await;
        let took = started.elapsed();
        let theirs = get_accept(&stack.upstream(), &path, JSON).await;
        assert_eq!((ours.status, theirs.status), (theirs.status, 200), "{path}");
        assert!(ours.body == theirs.body, "{path}: equals the apiserver's");
        assert_eq!(stack.served_from("cache").await, cache_before + 1, "{path}: from the cache");
        assert!(took < PROVEN_WITHIN, "{path}: took {took:?}");
    }
    // An RV ahead of the upstream too still gets the apiserver's 504 after its ~3 s.
    let ahead = stack.sim.current_rv() + 1000;
    let path = format!("{CMS}?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan");
    let started = Instant::now();
    let ours = get_accept(&stack.addr(), &path, JSON).await;
    assert_eq!(ours.status, 504);
    assert_eq!(ours.json()["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    assert!(started.elapsed() >= Duration::from_millis(2900));
}

/// A WatchList and a list not older than an RV the client had from another resource, past a
/// small quiet cache's own RV, are each proven by one metadata list of the cache, as consistent
/// reads of it are (`fresh::not_older_than_listed`): no current-RV list and then a probe, whose
/// bookmark the apiserver sends on its 1 s tick — the WatchList started ~1 s later than
/// directly. Its state and initial-events-end bookmark are the apiserver's; the list is, byte
/// for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_older_than_an_rv_past_a_small_quiet_cache_is_proven_by_one_metadata_list() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    wait_synced(&stack, "configmaps").await;
    let calls = |verb: &'static str| {
        let stack = &stack;
        async move {
            stack.metric_sum("kubeplex_upstream_calls_total", &[&format!("verb=\"{verb}\"")]).await
        }
    };
    let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10";

    let other = stack.move_cluster_on("wl");
    let path = format!("{CMS}?{wl}&resourceVersion={other}");
    let before = (calls("proof_list").await, calls("proof_watch").await);
    let watches_before = stack.upstream_calls_of("configmaps", "WATCH");
    let mut ours = watch(&stack.addr(), &path, JSON).await;
    let mut got = Vec::new();
    loop {
        let event = ours.next_within(Duration::from_secs(5)).await.expect("an event");
        let end = event["type"] == "BOOKMARK";
        got.push(event);
        if end {
            break;
        }
    }
    // (Before the apiserver is watched directly for comparison.)
    assert_eq!(stack.upstream_calls_of("configmaps", "WATCH"), watches_before, "no probe");
    let mut theirs = watch(&stack.upstream(), &path, JSON).await;
    let mut want = Vec::new();
    while want.len() < got.len() {
        want.push(theirs.next_within(Duration::from_secs(5)).await.expect("an event"));
    }
    assert_eq!(got, want, "the state and the initial-events-end bookmark");
    assert_eq!(calls("proof_list").await - before.0, 1, "one metadata list");
    assert_eq!(calls("proof_watch").await - before.1, 0, "no probe");

    let other = stack.move_cluster_on("list");
    let path = format!("{CMS}?resourceVersion={other}&resourceVersionMatch=NotOlderThan");
    let before = (calls("proof_list").await, calls("proof_watch").await);
    let cache_before = stack.served_from("cache").await;
    let ours = get_accept(&stack.addr(), &path, JSON).await;
    let theirs = get_accept(&stack.upstream(), &path, JSON).await;
    assert_eq!((ours.status, theirs.status), (200, 200));
    assert!(ours.body == theirs.body, "the apiserver's list, byte for byte");
    assert_eq!(stack.served_from("cache").await, cache_before + 1);
    assert_eq!(calls("proof_list").await - before.0, 1, "one metadata list");
    assert_eq!(calls("proof_watch").await - before.1, 0, "no probe");
}

/// RVs are the cluster's: the consistent reads that arrive together — a node's agents
/// starting, whatever resources they read — share one `limit=1` list, however many caches they
/// wait on (one per cache before). Here four resources are busy (written every 20 ms), so each
/// cache's own watch reaches the shared RV and no probe is needed: the burst of four reads of
/// four resources costs the upstream one list (two when a loaded machine spreads the reads past
/// the first list's sending, as the next one gathers the rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_reads_of_several_resources_share_one_proof_list() {
    let resources = ["configmaps", "pods", "secrets", "services"];
    let stack = Stack::new(shapes::SMALL, &resources).await;
    for r in ["configmaps", "pods", "services"] {
        wait_synced(&stack, r).await;
    }
    let churn = {
        let sim_addr = stack.upstream();
        tokio::spawn(async move {
            for i in 0..200 {
                for (resource, kind, spec) in [
                    ("configmaps", "ConfigMap", json!(null)),
                    ("secrets", "Secret", json!(null)),
                    ("services", "Service", json!({"ports": [{"port": 80}]})),
                    ("pods", "Pod", json!({"containers": [{"name": "c", "image": "app:1"}]})),
                ] {
                    let mut body = json!({"apiVersion": "v1", "kind": kind,
                        "metadata": {"name": format!("churn-{i}")}});
                    if !spec.is_null() {
                        body["spec"] = spec;
                    }
                    let path = format!("/api/v1/namespaces/team-0/{resource}");
                    let body = serde_json::to_vec(&body).unwrap();
                    let headers = [("Content-Type", JSON)];
                    request(&sim_addr, http::Method::POST, &path, &headers, Some(body)).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let proofs = |verb: &'static str| {
        let stack = &stack;
        async move {
            stack.metric_sum("kubeplex_upstream_calls_total", &[&format!("verb=\"{verb}\"")]).await
        }
    };
    let (lists, probes) = (proofs("proof_list").await, proofs("proof_watch").await);
    let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5";
    let cache_before = stack.served_from("cache").await;
    let started = Instant::now();
    join_all(resources.iter().map(|r| {
        let (addr, path) = (stack.addr(), format!("/api/v1/namespaces/team-0/{r}?{wl}"));
        async move {
            let mut w = watch(&addr, &path, JSON).await;
            loop {
                let line = w.next_line_within(Duration::from_secs(5)).await.expect("event");
                if line.windows(10).any(|w| w == b"\"BOOKMARK\"") {
                    return;
                }
            }
        }
    }))
    .await;
    let took = started.elapsed();
    churn.abort();
    assert_eq!(stack.served_from("cache").await - cache_before, 4, "all four from the caches");
    assert!(took < PROVEN_WITHIN, "took {took:?}");
    let shared = proofs("proof_list").await - lists;
    assert!((1..=2).contains(&shared), "{shared} proof lists for four resources' reads");
    assert_eq!(proofs("proof_watch").await - probes, 0, "busy caches need no probe");
}

/// A consistent WatchList of a small quiet cache it is all of (a kubelet's own pods, its Node)
/// is proven by one metadata list of the cache, answered at once: no streaming list, no probe
/// (two or three requests and ~1.5 s), no event to the watchers already on the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_watchlist_of_a_small_cache_it_covers_is_proven_by_a_metadata_list() {
    let stack =
        Stack::new(shapes::SMALL, &["pods:protobuf?fieldSelector=spec.nodeName=node-1"]).await;
    let costs = small_cache_watchlist(&stack, "").await;
    assert_eq!(costs, WatchListCosts { watchlists: 0, proof_lists: 1, probes: 0 });
    let listed = ["read=\"consistent\"", "proof=\"listed\""];
    assert_eq!(stack.metric_sum("kubeplex_freshness_proofs_total", &listed).await, 1);
}

/// A consistent WatchList of a small cache it is most of (a node's pods but one app's), where a
/// metadata list would cost more than the read beyond its slack, is proven by reloading the
/// cache: one streaming list of the cache's scope, about what the WatchList costs the apiserver
/// directly, answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_watchlist_of_a_small_cache_it_mostly_covers_is_proven_by_reloading_it() {
    // Node 1's 200 pods, 16 of them of app-0 or app-5 (some 40 KiB, past a metadata list's
    // 16 KiB of slack; within a reload's quarter).
    let shape = ClusterShape { pods: 800, ..shapes::SMALL };
    let stack = Stack::new(shape, &["pods:protobuf?fieldSelector=spec.nodeName=node-1"]).await;
    let costs = small_cache_watchlist(&stack, "&labelSelector=app+notin+%28app-0%2Capp-5%29").await;
    assert_eq!(costs, WatchListCosts { watchlists: 1, proof_lists: 1, probes: 0 });
    let reload = ["read=\"consistent\"", "proof=\"reload\""];
    assert_eq!(stack.metric_sum("kubeplex_freshness_proofs_total", &reload).await, 1);
}

/// What proving a consistent WatchList of the cache cost the upstream.
#[derive(Debug, PartialEq)]
struct WatchListCosts {
    watchlists: u64,
    proof_lists: u64,
    probes: u64,
}

/// A consistent WatchList of node 1's pods (and `selector`) through kubeplex, once the cluster
/// has moved on: equal byte for byte to the apiserver's, at once; a watcher already on the
/// cache sees nothing but its initial state. What its proof cost.
async fn small_cache_watchlist(stack: &Stack, selector: &str) -> WatchListCosts {
    wait_synced(stack, "pods").await;
    let current = stack.move_cluster_on("reload");
    let pb = "application/vnd.kubernetes.protobuf";
    let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10";
    let path = format!("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1{selector}&{wl}");
    // Someone already watching the cache.
    let mut old = watch(&stack.addr(), "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=1&resourceVersion=0&timeoutSeconds=10", JSON).await;
    let calls = |verb: &'static str| {
        let stack = &stack;
        async move {
            stack.metric_sum("kubeplex_upstream_calls_total", &[&format!("verb=\"{verb}\"")]).await
        }
    };
    let before = (calls("watchlist").await, calls("proof_list").await, calls("proof_watch").await);
    let started = Instant::now();
    let mut ours = watch(&stack.addr(), &path, pb).await;
    let mut theirs = watch(&stack.upstream(), &path, pb).await;
    let (mut got, mut want) = (Vec::new(), Vec::new());
    loop {
        let frame = ours.next_frame_within(Duration::from_secs(5)).await.expect("frame");
        let end = frame.windows(8).any(|w| w == b"BOOKMARK");
        got.push(frame);
        if end {
            break;
        }
    }
    let took = started.elapsed();
    while want.len() < got.len() {
        want.push(theirs.next_frame_within(Duration::from_secs(5)).await.expect("frame"));
    }
    assert_eq!(got, want, "the state and the initial-events-end bookmark, byte for byte");
    assert!(took < Duration::from_millis(800), "at once, no probe: {took:?}");
    assert!(stack.sim.current_rv() >= current);
    // The watcher that was already there saw its initial state and then nothing: a proof that
    // found no change sends none.
    let mut seen = 0;
    while let Some(e) = old.next_within(Duration::from_millis(300)).await {
        assert_eq!(e["type"], "ADDED", "{e}");
        seen += 1;
    }
    assert!(seen > 0);
    WatchListCosts {
        watchlists: calls("watchlist").await - before.0,
        proof_lists: calls("proof_list").await - before.1,
        probes: calls("proof_watch").await - before.2,
    }
}

/// A consistent WatchList of one object in a small quiet cache — the kubelet's watch of each
/// ConfigMap and Secret its pods use, which a pool tier gets from every node — is proven by one
/// metadata list of the cache: no reload (which would send every object of the cache as an
/// event, for each such read) and no probe (~1.5 s). The read starts at the list's RV, so the
/// answer is the apiserver's, byte for byte, its bookmark included; and a change made just
/// before the read is in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_watch_of_one_object_in_a_small_quiet_cache_is_proven_by_one_metadata_list() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    for name in ["watched", "changed"] {
        stack
            .sim
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "team-0"}, "data": {"v": "1"}}))
            .expect("create");
    }
    wait_synced(&stack, "configmaps").await;
    let calls = || async {
        let m = "kubeplex_upstream_calls_total";
        (
            stack.metric_sum(m, &["verb=\"proof_list\""]).await,
            stack.metric_sum(m, &["verb=\"proof_watch\""]).await,
            stack.metric_sum(m, &["verb=\"watchlist\""]).await,
        )
    };
    let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10";
    let named = |name: &str| format!("{CMS}?fieldSelector=metadata.name%3D{name}&{wl}");
    let initial_state = |mut w: Watch| async move {
        let mut lines = Vec::new();
        loop {
            let line = w.next_line_within(Duration::from_secs(5)).await.expect("event");
            let end = line.windows(10).any(|w| w == b"\"BOOKMARK\"");
            lines.push(line);
            if end {
                return lines;
            }
        }
    };
    for (name, change) in [("watched", false), ("changed", true)] {
        let current = stack.move_cluster_on(name);
        if change {
            // Just before the read: the cache may not have it yet when the read arrives.
            stack
                .sim
                .modify("", "configmaps", "team-0", name, |v| v["data"]["v"] = json!("2"))
                .expect("modify");
        }
        let before = calls().await;
        let namespace_lists = namespace_lists_of(&stack, "configmaps");
        let started = Instant::now();
        let ours = initial_state(watch(&stack.addr(), &named(name), JSON).await).await;
        let took = started.elapsed();
        let theirs = initial_state(watch(&stack.upstream(), &named(name), JSON).await).await;
        assert_eq!(ours, theirs, "the state and the initial-events-end bookmark, byte for byte");
        let end: Value = serde_json::from_slice(ours.last().expect("end")).expect("json");
        assert!(rv_of(&end) >= current);
        if change {
            assert!(
                String::from_utf8_lossy(&ours[0]).contains("\"v\":\"2\""),
                "the change is in it"
            );
        }
        assert!(took < Duration::from_millis(800), "at once, no probe: {took:?}");
        let after = calls().await;
        assert_eq!(after.0 - before.0, 1, "one metadata list");
        assert_eq!(
            namespace_lists_of(&stack, "configmaps") - namespace_lists,
            1,
            "of the read's namespace, not of the cluster the cache holds"
        );
        assert_eq!((after.1, after.2), (before.1, before.2), "no probe, no reload");
    }
    let listed = ["read=\"consistent\"", "proof=\"listed\""];
    assert_eq!(stack.metric_sum("kubeplex_freshness_proofs_total", &listed).await, 2);
}

/// A pool tier holds every ConfigMap of the cluster; a kubelet's consistent watch of one of them
/// reads a namespace of few. The whole cache is too large to list for that read, the namespace
/// is not: the watch is proven by a metadata list of its namespace — at once, where a bookmark
/// probe takes ~1.5 s (with real kubelets behind a pool, every pod's volumes waited ~1 s for
/// it) — and reads of other namespaces arriving with it each get their own namespace's list:
/// never one of the whole cache. The answers are the apiserver's, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_one_configmap_in_a_large_cache_is_proven_by_a_list_of_its_namespace() {
    let stack = Stack::new(shapes::SMALL, &["configmaps"]).await;
    let filler = "x".repeat(2048);
    for i in 0..40 {
        stack
            .sim
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("big-{i}"), "namespace": "team-1"},
                "data": {"v": filler}}))
            .expect("create");
    }
    for ns in ["team-0", "team-2"] {
        stack
            .sim
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "mounted", "namespace": ns}, "data": {"v": "1"}}))
            .expect("create");
    }
    wait_synced(&stack, "configmaps").await;
    let calls = |verb: &'static str| {
        let stack = &stack;
        async move {
            stack.metric_sum("kubeplex_upstream_calls_total", &[&format!("verb=\"{verb}\"")]).await
        }
    };
    let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10";
    let named = |ns: &str| {
        format!("/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Dmounted&{wl}")
    };
    let initial_state = |mut w: Watch| async move {
        let mut lines = Vec::new();
        loop {
            let line = w.next_line_within(Duration::from_secs(5)).await.expect("event");
            let end = line.windows(10).any(|w| w == b"\"BOOKMARK\"");
            lines.push(line);
            if end {
                return lines;
            }
        }
    };
    // Quiet, as a pool's ConfigMaps mostly are: a busy cache is proven by the clock's shared
    // current-RV list first.
    tokio::time::sleep(Duration::from_millis(400)).await;
    stack.move_cluster_on("moved");
    let (probes, reloads) = (calls("proof_watch").await, calls("watchlist").await);
    let (namespace_lists, cluster_lists) =
        (namespace_lists_of(&stack, "configmaps"), cluster_lists_of(&stack, "configmaps"));
    let started = Instant::now();
    let (team0, team2) = tokio::join!(
        async { initial_state(watch(&stack.addr(), &named("team-0"), JSON).await).await },
        async { initial_state(watch(&stack.addr(), &named("team-2"), JSON).await).await },
    );
    let took = started.elapsed();
    for (ns, ours) in [("team-0", team0), ("team-2", team2)] {
        let theirs = initial_state(watch(&stack.upstream(), &named(ns), JSON).await).await;
        assert_eq!(ours, theirs, "{ns}: the state and its bookmark, byte for byte");
    }
    assert!(took < Duration::from_millis(800), "at once, no probe: {took:?}");
    assert_eq!(calls("proof_watch").await, probes, "no probe");
    assert_eq!(calls("watchlist").await, reloads, "no reload");
    assert_eq!(
        namespace_lists_of(&stack, "configmaps") - namespace_lists,
        2,
        "a list of each read's namespace"
    );
    assert_eq!(cluster_lists_of(&stack, "configmaps"), cluster_lists, "none of the whole cache");
}

/// A consistent watch whose freshness proof the apiserver does not answer within
/// `consistentReadWait` (overloaded: its lists of a namespace take seconds), or answers 429, is
/// answered 429 with
/// `Retry-After`, as the apiserver's priority and fairness would answer it — not passed on, where
/// it would hold the overloaded apiserver for minutes (1,000 node tiers starting at once behind a
/// pool had ~6,000 such watches passed on). Sent again once the apiserver answers in time, it is
/// proven and served from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_proof_times_out_is_answered_429_not_passed_on() {
    let mut config = support::stack::default_caches(&["configmaps"]);
    config.freshness.consistent_wait = Duration::from_millis(500);
    let stack = Stack::with_caches(SimBuilder::new(), shapes::SMALL, config).await;
    stack
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "mounted", "namespace": "team-0"}, "data": {"v": "1"}}))
        .expect("create");
    wait_synced(&stack, "configmaps").await;
    // Quiet, and the cluster moved on: the watch needs a proof (a metadata list of team-0).
    tokio::time::sleep(Duration::from_millis(400)).await;
    stack.move_cluster_on("moved");
    let watches = || stack.upstream_calls_of("configmaps", "WATCH");
    let before = watches();
    stack.sim.slow_wide_reads("", "configmaps", Some(Duration::from_secs(3)));
    let named = "/api/v1/namespaces/team-0/configmaps?fieldSelector=metadata.name%3Dmounted&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5";
    let refused = get(&stack.addr(), named).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(&refused.body[..], b"Too many requests, please try again later.\n");
    assert_eq!(watches(), before, "not passed on");
    // The apiserver answers in time again (the proof list it held has ended): proven, and
    // served from the cache.
    stack.sim.slow_wide_reads("", "configmaps", None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut w = watch(&stack.addr(), named, JSON).await;
    let first = w.next_within(Duration::from_secs(5)).await.expect("the configmap");
    assert_eq!(first["object"]["metadata"]["name"], "mounted");
    assert_eq!(watches(), before, "served from the cache");
    drop(w);
    // The apiserver's priority and fairness refuses the proof's list (429): the same answer.
    tokio::time::sleep(Duration::from_millis(400)).await;
    stack.move_cluster_on("again");
    stack.sim.throttle(1, 1);
    let refused = get(&stack.addr(), named).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(watches(), before, "not passed on");
}

/// A consistent watch proven by the upstream's current RV — a node's pods in a cache of every
/// pod, which no metadata list proves as cheaply — whose `limit=1` list the apiserver refuses
/// 429 is answered 429 too, not passed on to the overloaded apiserver (at 2,000 node tiers
/// starting behind a pool, ~1,200 such watches per replica went on, and the apiserver refused
/// most of them in turn). The list is shared by every cache's reads that come together, and so
/// is what its refusal says: a protobuf watch that shared it (its cache rendered from the JSON
/// one, its proofs its own) is answered 429 as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_current_rv_list_is_throttled_is_answered_429_not_passed_on() {
    let stack = Stack::new(shapes::SMALL, &["pods"]).await;
    wait_synced(&stack, "pods").await;
    // The protobuf cache, rendered from the JSON one.
    let pods = "/api/v1/pods?resourceVersion=0";
    assert_eq!(get_accept(&stack.addr(), pods, PB).await.status, 200);
    let protobuf = ["resource=\"pods\"", "encoding=\"protobuf\""];
    for _ in 0..100 {
        if stack.metric_sum("kubeplex_cache_objects", &protobuf).await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Quiet, and the cluster moved on: the watches need a proof.
    tokio::time::sleep(Duration::from_millis(400)).await;
    stack.move_cluster_on("moved");
    let watches = || stack.upstream_calls("WATCH");
    let before = watches();
    stack.sim.throttle(1, 1);
    let node = |n: u32| {
        format!("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-{n}&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5")
    };
    let (addr, one, two) = (stack.addr(), node(1), node(2));
    let (json, pb) = tokio::join!(get_accept(&addr, &one, JSON), get_accept(&addr, &two, PB));
    for refused in [&json, &pb] {
        assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
        assert_eq!(refused.header("retry-after"), "1");
    }
    assert_eq!(watches(), before, "not passed on");
}

/// A cold cache's first reader asking for all of its scope in one unpaged list is passed
/// through, and its answer — the apiserver's bytes, as fast as directly — is the cache's first
/// load: one list upstream, then the cache's watch, and the next read is the cache's. In
/// protobuf as in JSON, and an informer's first list at resourceVersion=0, whose `limit` the
/// apiserver ignores. A paged read (`limit`) is not all of it: the cache loads by itself.
#[tokio::test]
async fn a_cold_caches_first_unpaged_list_is_passed_through_and_is_its_first_load() {
    let stack = Stack::new(shapes::SMALL, &[]).await;
    let calls = |resource: &'static str, verb: &'static str| {
        let stack = &stack;
        async move {
            let (r, v) = (format!("resource=\"{resource}"), format!("verb=\"{verb}\""));
            stack.metric_sum("kubeplex_upstream_calls_total", &[&r, &v]).await
        }
    };
    // An informer's first list too: at resourceVersion=0 the apiserver ignores `limit`.
    for (resource, path, accept) in [
        ("configmaps", "/api/v1/configmaps", JSON),
        ("services", "/api/v1/services?resourceVersion=0", PB),
        ("nodes", "/api/v1/nodes?limit=500&resourceVersion=0", JSON),
    ] {
        let (cache, upstream) =
            (stack.served_from("cache").await, stack.served_from("upstream").await);
        let first = get_accept(&stack.addr(), path, accept).await;
        wait_synced(&stack, resource).await;
        assert_eq!(stack.upstream_calls_of(resource, "LIST"), 1, "{path}: one list upstream");
        let direct = get_accept(&stack.upstream(), path, accept).await;
        assert_eq!(first.status, 200);
        assert!(first.body == direct.body, "{path}: the apiserver's answer");
        assert_eq!(stack.served_from("upstream").await, upstream + 1, "{path}: passed through");
        assert_eq!((calls(resource, "reader_list").await, calls(resource, "list").await), (1, 0));
        let again = get_accept(&stack.addr(), path, accept).await;
        assert!(again.body == direct.body, "{path}: the cache's answer");
        assert_eq!(stack.served_from("cache").await, cache + 1, "{path}: from the cache");
    }
    // Paged: the first page passes through, and the cache's own load follows.
    let paged = "/api/v1/namespaces/team-0/pods?limit=5";
    let first = get_accept(&stack.addr(), paged, JSON).await;
    assert_eq!(first.status, 200);
    wait_synced(&stack, "pods").await;
    assert_eq!(calls("pods", "reader_list").await, 0, "a page is not the cache's load");
}
