//! `/debug/caches` on the admin listener: what an operator reads to see each cache's size, RV,
//! watchers, history, and how long since it heard from the upstream.

use std::time::Duration;

use kubeplex_sim::seed::ClusterShape;
use kubeplex_test_support as support;
use support::stack::Stack;

fn caches(admin: &str, body: &[u8]) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("{admin}: {e}"));
    v["caches"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_caches_shows_each_cache_and_how_stale_it_is() {
    let shape = ClusterShape { nodes: 2, namespaces: 2, pods: 10, configmaps: 8, services: 0 };
    let stack = Stack::new(shape, &["configmaps"]).await;
    let admin = stack.proxy.admin_addr.unwrap().to_string();
    let mut watch = support::watch(
        &stack.addr(),
        "/api/v1/configmaps?watch=1&resourceVersion=0",
        "application/json",
    )
    .await;
    assert!(watch.next_within(Duration::from_secs(5)).await.is_some());

    let resp = support::get(&admin, "/debug/caches").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), "application/json");
    let all = caches(&admin, &resp.body);
    let cm = all.iter().find(|c| c["resource"] == "configmaps/v1").expect("the configmaps cache");
    assert_eq!(cm["encoding"], "json");
    assert_eq!(cm["synced"], true);
    assert_eq!(cm["pinned"], true);
    assert_eq!(cm["objects"], stack.sim.count("", "configmaps") as u64);
    assert!(cm["bytes"].as_u64().unwrap() > 0);
    assert_eq!(cm["resource_version"], stack.sim.current_rv());
    assert_eq!(cm["watchers"], 1);
    assert_eq!(cm["waiting_reads"], 0, "nothing waits on a synced cache");
    assert!(cm["seconds_since_upstream"].as_u64().unwrap() <= 5, "{cm}");
    assert_eq!(cm["watching"], true, "its watch runs: {cm}");

    // A read for an RV the cache has not reached waits on it (then gets the apiserver's 504),
    // and the view says so meanwhile.
    let ahead = stack.sim.current_rv() + 1000;
    let waiting = {
        let addr = stack.addr();
        tokio::spawn(async move {
            let path = format!(
                "/api/v1/configmaps?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"
            );
            support::get(&addr, &path).await.status
        })
    };
    let mut seen = 0;
    for _ in 0..40 {
        let all = caches(&admin, &support::get(&admin, "/debug/caches").await.body);
        let cm = all.iter().find(|c| c["resource"] == "configmaps/v1").expect("configmaps");
        seen = cm["waiting_reads"].as_u64().unwrap();
        if seen > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(seen, 1, "the waiting read is shown");
    assert_eq!(waiting.await.unwrap(), 504);

    // The upstream goes away: the cache keeps its state, and says how long it has been alone.
    stack.sim.stop_serving();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let all = caches(&admin, &support::get(&admin, "/debug/caches").await.body);
    let cm = all.iter().find(|c| c["resource"] == "configmaps/v1").expect("still there");
    assert!(cm["seconds_since_upstream"].as_u64().unwrap() >= 2, "{cm}");
    assert_eq!(cm["watching"], false, "its watch failed and cannot come back: {cm}");
    assert_eq!(cm["objects"], stack.sim.count("", "configmaps") as u64);
}
