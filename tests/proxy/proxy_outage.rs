//! An upstream outage longer than every TTL kubeplex keeps (issue 13): with the fake apiserver
//! stopped for several discovery TTLs (1 s here, 300 s by default), cached reads — lists and
//! gets at resourceVersion=0, new watches from the state or resuming from a recent RV — are
//! answered from the last state with the bytes they had before the outage, open watches stay
//! open, and when the apiserver comes back the caches catch up and open watches see the
//! changes. Reads only the apiserver can answer (a consistent list it cannot be proven fresh
//! for, a resource not cached yet) get 503, as a client of a dead apiserver gets an error — a
//! watch 429, which client-go's reflector treats as the refused connection it would have got.

use kubeplex_test_support as support;

use std::time::Duration;

use kubeplex::cache::fanout::WatchConfig;
use kubeplex::live::caches::FreshnessConfig;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use serde_json::Value;
use support::stack::Stack;
use support::watchers::*;
use support::*;
use tokio::time::Instant;

/// The discovery TTL of the test: the outage lasts several of them.
const TTL: Duration = Duration::from_secs(1);
/// How long the apiserver is down.
const OUTAGE: Duration = Duration::from_secs(5);
/// The cold-start wait of a cache started during the outage (then 503).
const SYNC_WAIT: Duration = Duration::from_secs(1);

const JSON: &str = "application/json";
const UPDATED: &str = "kubeplex_cache_updated_timestamp_seconds";

/// When the pods cache last heard from the upstream (Unix seconds), as its metric says.
async fn heard(stack: &Stack) -> u64 {
    let at = stack.metric_sum(UPDATED, &["resource=\"pods/v1\"", "encoding=\"json\""]).await;
    assert!(at > 0, "no {UPDATED} for pods");
    at
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn shape() -> ClusterShape {
    ClusterShape { nodes: 2, namespaces: 2, pods: 12, configmaps: 4, services: 2 }
}

/// The cached reads of the test, each compared byte for byte before, during and after.
fn cached_reads(pod: &str) -> Vec<String> {
    vec![
        "/api/v1/pods?resourceVersion=0".to_string(),
        "/api/v1/namespaces/team-0/pods?resourceVersion=0".to_string(),
        "/api/v1/pods?resourceVersion=0&labelSelector=tier%3Dfrontend".to_string(),
        format!("/api/v1/namespaces/team-0/pods/{pod}?resourceVersion=0"),
        "/api/v1/configmaps?resourceVersion=0".to_string(),
    ]
}

fn new_pod(name: &str) -> Value {
    small_pod("team-0", name, "a", "node-0")
}

fn names_of(list: &Value) -> Vec<String> {
    items_of(list).into_keys().collect()
}

/// Reads `n` JSON events from a watch (bookmarks skipped); fails the test on a stall.
async fn events(w: &mut Watch, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        let e = w.next_within(STEP).await.unwrap_or_else(|| panic!("stalled after {out:?}"));
        if e["type"] != "BOOKMARK" {
            out.push(e);
        }
    }
    out
}

#[tokio::test]
async fn cached_reads_and_watches_outlive_an_upstream_outage_and_catch_up_after() {
    let freshness = FreshnessConfig { sync_wait: SYNC_WAIT, ..FreshnessConfig::default() };
    let stack = Stack::build_discovery(
        SimBuilder::new(),
        shape(),
        &["pods", "configmaps"],
        Duration::from_secs(600),
        WatchConfig::default(),
        freshness,
        TTL,
    )
    .await;
    let addr = stack.addr();
    // --- Before: the answers to compare with.
    let pods = list_ok(&addr, "/api/v1/namespaces/team-0/pods?resourceVersion=0").await.json();
    let pod = names_of(&pods).first().and_then(|k| k.split('/').nth(1)).expect("a pod").to_string();
    let rv: u64 =
        pods["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("rv");
    let reads = cached_reads(&pod);
    let mut before = Vec::new();
    for path in &reads {
        let r = get(&addr, path).await;
        assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        before.push(r.body);
    }
    let open_path = format!("/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={rv}");
    let mut open = watch(&addr, &open_path, JSON).await;
    assert_eq!(open.status, 200);
    // What kubeplex holds open at the apiserver: the pods cache's one watch.
    let pods_watch = ["resource=\"pods/v1\""];
    assert_eq!(stack.metric_sum("kubeplex_upstream_watches", &pods_watch).await, 1);

    // --- The apiserver goes away for several discovery TTLs.
    let stopped = Instant::now();
    stack.sim.stop_serving();
    // A write the cluster accepted meanwhile (through another apiserver): not seen until back.
    stack.sim.create(new_pod("during-outage")).expect("create");
    let from_upstream = stack.served_from("upstream").await;
    let cached_lists = stack.served_verb_from("LIST", "cache").await;
    let cached_gets = stack.served_verb_from("GET", "cache").await;
    let mut rounds = 0;
    while stopped.elapsed() < OUTAGE {
        tokio::time::sleep(TTL / 2).await;
        for (path, want) in reads.iter().zip(&before) {
            let r = get(&addr, path).await;
            assert_eq!(
                r.status,
                200,
                "{:?} into the outage, {path}: {}",
                stopped.elapsed(),
                String::from_utf8_lossy(&r.body)
            );
            assert_eq!(&r.body, want, "{path}: the bytes from before the outage");
        }
        rounds += 1;
    }
    assert!(stopped.elapsed() > TTL * 4, "the outage outlasted the TTL several times");
    // Every read was the cache's: none reached (or could reach) the upstream.
    assert_eq!(stack.served_verb_from("LIST", "cache").await - cached_lists, 4 * rounds);
    assert_eq!(stack.served_verb_from("GET", "cache").await - cached_gets, rounds);
    assert_eq!(stack.served_from("upstream").await, from_upstream);
    // The metrics say how stale: the pods cache last heard from the upstream before the outage.
    let behind = now_secs() - heard(&stack).await;
    assert!(behind + 1 >= OUTAGE.as_secs(), "pods cache last heard {behind} s ago");
    // Discovery says it is stale, and why.
    assert!(stack.metric("kubeplex_discovery_stale_entries").await >= 1);
    assert!(stack.metric_sum("kubeplex_discovery_fetches_total", &["result=\"error\""]).await >= 1);
    // The reflectors' failed reconnects, counted as the upstream being unreachable.
    let unreachable = ["resource=\"pods/v1\"", "reason=\"unreachable\""];
    assert!(stack.metric_sum("kubeplex_upstream_errors_total", &unreachable).await >= 1);
    // ... and its watch is not open.
    assert_eq!(stack.metric_sum("kubeplex_upstream_watches", &pods_watch).await, 0);

    // New watches, well past the TTL: from the state (RV=0), and resuming from a recent RV.
    let mut from_state =
        watch(&addr, "/api/v1/namespaces/team-0/pods?watch=1&resourceVersion=0", JSON).await;
    assert_eq!(from_state.status, 200);
    let initial = events(&mut from_state, pods["items"].as_array().map_or(0, Vec::len)).await;
    let mut keys: Vec<String> = initial.iter().map(key_of).collect();
    keys.sort();
    assert_eq!(keys, names_of(&pods), "the state as ADDED events");
    assert!(initial.iter().all(|e| e["type"] == "ADDED"));
    let mut resumed = watch(&addr, &open_path, JSON).await;
    assert_eq!(resumed.status, 200);
    assert!(!resumed.ends_within(Duration::from_millis(300)).await, "a resumed watch stays open");
    assert_eq!(stack.served_from("upstream").await, from_upstream, "watches from the cache");

    // What only the apiserver can answer gets the answer of an unreachable apiserver.
    let started = Instant::now();
    let consistent = get(&addr, "/api/v1/namespaces/team-0/pods").await;
    assert_eq!(consistent.status, 503, "{}", String::from_utf8_lossy(&consistent.body));
    assert_eq!(consistent.json()["kind"], "Status");
    let cold = get(&addr, "/api/v1/services?resourceVersion=0").await;
    assert_eq!(
        cold.status,
        503,
        "a cache that cannot load: {}",
        String::from_utf8_lossy(&cold.body)
    );
    // A watch only the apiserver can answer gets 429, `Retry-After: 1`: client-go's reflector
    // resumes a watch answered 429 from where it was, as it does one refused its connection by
    // a dead apiserver, where a 503 would have it relist (`isWatchErrorRetriable`).
    let mut refused = watch(&addr, "/api/v1/services?watch=1&resourceVersion=0", JSON).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.headers.get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]));
    let line = refused.next_line_within(Duration::from_secs(5)).await.expect("a Status");
    let status: Value = serde_json::from_slice(&line).expect("a Status");
    assert_eq!(
        (
            &status["kind"],
            &status["reason"],
            &status["code"],
            &status["details"]["retryAfterSeconds"]
        ),
        (
            &Value::from("Status"),
            &Value::from("TooManyRequests"),
            &Value::from(429),
            &Value::from(1)
        ),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("error trying to reach the upstream")),
        "{status}"
    );
    assert!(
        started.elapsed() < SYNC_WAIT + Duration::from_secs(5),
        "bounded: {:?}",
        started.elapsed()
    );
    // The open watch never ended.
    assert!(!open.ends_within(Duration::from_millis(100)).await, "the open watch stays open");

    // --- The apiserver is back: the caches catch up; open watches see what changed.
    stack.sim.restart().await.expect("restart");
    stack.sim.create(new_pod("after-outage")).expect("create");
    let seen = events(&mut open, 2).await;
    let got: Vec<(String, String)> =
        seen.iter().map(|e| (e["type"].as_str().unwrap_or("").to_string(), key_of(e))).collect();
    assert_eq!(
        got,
        [
            ("ADDED".into(), "team-0/during-outage".into()),
            ("ADDED".into(), "team-0/after-outage".into())
        ]
    );
    assert_eq!(
        stack.metric_sum("kubeplex_upstream_watches", &pods_watch).await,
        1,
        "watching again"
    );
    let resumed_seen = events(&mut resumed, 2).await;
    assert_eq!(
        resumed_seen.iter().map(key_of).collect::<Vec<_>>(),
        ["team-0/during-outage", "team-0/after-outage"]
    );
    let from_state_seen = events(&mut from_state, 2).await;
    assert_eq!(
        from_state_seen.iter().map(key_of).collect::<Vec<_>>(),
        ["team-0/during-outage", "team-0/after-outage"]
    );
    let want = apiserver_state(&stack, "/api/v1/namespaces/team-0/pods").await;
    let caught_up = eventually(Duration::from_secs(20), || async {
        items_of(&list_ok(&addr, "/api/v1/namespaces/team-0/pods?resourceVersion=0").await.json())
            == want
    })
    .await;
    assert!(caught_up, "lists from the cache converge to the apiserver's state");
    let behind = now_secs() - heard(&stack).await;
    assert!(behind <= 2, "pods cache heard from the upstream again ({behind} s ago)");
    // Discovery answers again: nothing stale.
    let fresh = eventually(Duration::from_secs(20), || async {
        let _ = get(&addr, "/api/v1/pods?resourceVersion=0").await;
        stack.metric("kubeplex_discovery_stale_entries").await == 0
    })
    .await;
    assert!(fresh, "discovery refreshed once the upstream answers");
    // And reads only the apiserver answers work again.
    assert_eq!(get(&addr, "/api/v1/services?resourceVersion=0").await.status, 200);
}
