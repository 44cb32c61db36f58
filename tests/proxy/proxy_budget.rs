//! The caches' memory budget and cold caches in an outage (issue 13):
//!
//! - a cache whose load would take the caches past `cacheMemoryBudget` is not started: its
//!   reads pass through (the apiserver answers them, byte for byte), the refusal is counted and
//!   shown in `/debug/caches` and `/readyz?verbose`; caches that fit go on serving;
//! - a cache that grows past the budget by watch events is refused the same way (caches started
//!   on demand before configured ones): its watchers end, its reads pass through;
//! - a cache whose first load fails (the apiserver down) does not hold its reads for the whole
//!   sync wait: they get the upstream's answer at once, and the cache syncs when it is back.

use kubeplex_test_support as support;

use std::net::SocketAddr;
use std::time::Duration;

use kubeplex::live::caches::{CachesConfig, FreshnessConfig};
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::Value;
use support::stack::{default_caches, Stack};
use support::*;
use tokio::time::Instant;

fn shape() -> ClusterShape {
    ClusterShape { nodes: 2, namespaces: 2, pods: 12, configmaps: 6, services: 0 }
}

async fn kubeplex(sim: &Sim, budget: Option<usize>) -> Proxy {
    let dir = std::env::temp_dir().join(format!("kubeplex-budget-{}", sim.addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let upstream = Upstream::new(UpstreamConfig::resolve(Some(&kc), None).unwrap()).unwrap();
    let caches = CachesConfig { memory_budget: budget, ..default_caches(&["pods"]) };
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let proxy = Proxy::builder(upstream, caches).listen(local).admin(local).start().await.unwrap();
    let admin = proxy.admin_addr.unwrap().to_string();
    let until = Instant::now() + Duration::from_secs(10);
    while get(&admin, "/readyz").await.status != 200 {
        assert!(Instant::now() < until, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy
}

fn scrape(proxy: &Proxy, name: &str, labels: &[&str]) -> u64 {
    String::from_utf8_lossy(&proxy.state.metrics.render())
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

async fn debug_caches(proxy: &Proxy) -> Value {
    get(&proxy.admin_addr.unwrap().to_string(), "/debug/caches").await.json()
}

fn bytes_of(debug: &Value, resource: &str) -> usize {
    let caches = debug["caches"].as_array().unwrap();
    let c = caches.iter().find(|c| c["resource"] == resource).expect(resource);
    c["bytes"].as_u64().unwrap() as usize
}

/// The sim's count of list requests for `resource` (every answer).
fn upstream_lists(sim: &Sim, resource: &str) -> u64 {
    sim.metrics_text()
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(&format!("resource=\"{resource}\"")) && l.contains("verb=\"LIST\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// What the pods and configmaps caches weigh, measured by an unbudgeted kubeplex.
async fn weigh(sim: &Sim) -> (usize, usize) {
    let measure = kubeplex(sim, None).await;
    let cms = "/api/v1/configmaps?resourceVersion=0";
    assert_eq!(get(&measure.addr.to_string(), cms).await.status, 200);
    // The read passed through and fed the cache's first load, applied once the cache's own
    // watch is answered (`live::reflector::fed`): a moment after the read's answer.
    support::stack::caches_once_synced(&measure).await;
    let debug = debug_caches(&measure).await;
    let (pods_bytes, cm_bytes) = (bytes_of(&debug, "pods/v1"), bytes_of(&debug, "configmaps/v1"));
    assert!(pods_bytes > 0 && cm_bytes > 0, "{debug}");
    measure.shutdown(Duration::from_secs(2)).await;
    (pods_bytes, cm_bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_over_the_memory_budget_is_refused_and_its_reads_pass_through() {
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let (pods_bytes, cm_bytes) = weigh(&sim).await;
    let cms = "/api/v1/configmaps?resourceVersion=0";

    // Room for the pods and half the configmaps.
    let budget = pods_bytes + cm_bytes / 2;
    let proxy = kubeplex(&sim, Some(budget)).await;
    let addr = proxy.addr.to_string();
    let direct = get(&sim.addr().to_string(), cms).await;
    let lists_before = upstream_lists(&sim, "configmaps");
    for round in 0..3 {
        let through = get(&addr, cms).await;
        assert_eq!(through.status, 200, "round {round}");
        assert_eq!(through.body, direct.body, "round {round}: the apiserver's own answer");
    }
    // Each read reached the apiserver (the refused cache's one list aside).
    let lists = upstream_lists(&sim, "configmaps") - lists_before;
    assert!(lists >= 3, "{lists} configmap lists upstream");
    let cm_labels = ["resource=\"configmaps/v1\"", "encoding=\"json\""];
    assert_eq!(scrape(&proxy, "kubeplex_cache_budget_refused_total", &cm_labels), 1);
    assert_eq!(scrape(&proxy, "kubeplex_cache_budget_bytes", &[]), budget as u64);
    let served = ["resource=\"configmaps\"", "source=\"cache\""];
    assert_eq!(scrape(&proxy, "kubeplex_requests_total", &served), 0, "nothing from the cache");
    // The pods still come from their cache.
    let pods = get(&addr, "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(pods.status, 200);
    let from_cache = ["resource=\"pods\"", "source=\"cache\""];
    assert!(scrape(&proxy, "kubeplex_requests_total", &from_cache) >= 1);
    // What an operator sees.
    let debug = debug_caches(&proxy).await;
    let refused = debug["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{debug}");
    assert_eq!(refused[0]["resource"], "configmaps/v1");
    assert_eq!(refused[0]["bytes"].as_u64().unwrap() as usize, cm_bytes);
    assert!(debug["caches"].as_array().unwrap().iter().all(|c| c["resource"] != "configmaps/v1"));
    let admin = proxy.admin_addr.unwrap().to_string();
    let ready = get(&admin, "/readyz?verbose").await;
    assert_eq!(ready.status, 200);
    let text = String::from_utf8_lossy(&ready.body);
    assert!(text.contains("[+]cache pods/v1 (json) ok\n"), "{text}");
    assert!(
        text.contains("[+]cache configmaps/v1 (json) ok: refused by the memory budget"),
        "{text}"
    );
    assert!(text.ends_with("readyz check passed\n"), "{text}");
    proxy.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_grows_past_the_budget_by_watch_events_is_refused() {
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let (pods_bytes, cm_bytes) = weigh(&sim).await;
    let cms = "/api/v1/configmaps?resourceVersion=0";

    // Both fit, with 8 KiB to spare.
    let budget = pods_bytes + cm_bytes + 8192;
    let proxy = kubeplex(&sim, Some(budget)).await;
    let addr = proxy.addr.to_string();
    let cm_labels = ["resource=\"configmaps/v1\"", "encoding=\"json\""];
    assert_eq!(get(&addr, cms).await.status, 200);
    let mut open = support::watch(&addr, &format!("{cms}&watch=1"), "application/json").await;
    assert_eq!(open.status, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(scrape(&proxy, "kubeplex_cache_budget_refused_total", &cm_labels), 0, "it fits");

    // The configmaps grow by 16 KiB, through watch events.
    for i in 0..4 {
        let data = "x".repeat(4096);
        sim.create(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i}"), "namespace": "team-0"},
            "data": {"blob": data}
        }))
        .unwrap();
    }
    let until = Instant::now() + Duration::from_secs(10);
    while scrape(&proxy, "kubeplex_cache_budget_refused_total", &cm_labels) == 0 {
        assert!(Instant::now() < until, "the grown cache was never refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its watcher ended (to resume through the apiserver); its reads pass through, byte for
    // byte; the configured pods cache, which fits alone, goes on serving.
    assert!(open.ends_within(Duration::from_secs(5)).await, "the refused cache's watch ended");
    let from_cache = ["resource=\"configmaps\"", "source=\"cache\""];
    let cached_before = scrape(&proxy, "kubeplex_requests_total", &from_cache);
    let direct = get(&sim.addr().to_string(), cms).await;
    let through = get(&addr, cms).await;
    assert_eq!(through.status, 200);
    assert_eq!(through.body, direct.body, "the apiserver's own answer");
    assert_eq!(scrape(&proxy, "kubeplex_requests_total", &from_cache), cached_before);
    let debug = debug_caches(&proxy).await;
    assert_eq!(debug["refused"][0]["resource"], "configmaps/v1", "{debug}");
    assert!(debug["caches"].as_array().unwrap().iter().any(|c| c["resource"] == "pods/v1"));
    let pods = ["resource=\"pods/v1\""];
    assert_eq!(scrape(&proxy, "kubeplex_cache_budget_refused_total", &pods), 0);
    proxy.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_cache_in_an_outage_passes_reads_through_at_once_then_syncs() {
    let stack = Stack::new(shape(), &[]).await;
    let addr = stack.addr();
    // The apiserver goes away before anything read configmaps: their cache starts cold.
    stack.sim.stop_serving();
    let path = "/api/v1/configmaps?resourceVersion=0";
    let asked = Instant::now();
    let r = get(&addr, path).await;
    let took = asked.elapsed();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    // Far from the 15 s sync wait: the first read, which was to feed the cache's first load,
    // passed through and got the outage's answer at once.
    assert!(took < FreshnessConfig::SYNC_WAIT / 3, "{took:?}");
    // A second read does not wait long either: the cache's own load failed, which ends the
    // wait (or had failed already).
    let asked = Instant::now();
    assert_eq!(get(&addr, path).await.status, 503);
    assert!(asked.elapsed() < FreshnessConfig::SYNC_WAIT / 3, "{:?}", asked.elapsed());
    let failed = ["resource=\"configmaps/v1\"", "result=\"load_failed\""];
    assert!(stack.metric_sum("kubeplex_cache_sync_waits_total", &failed).await >= 1);

    stack.sim.restart().await.unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(&addr, path).await;
        if r.status == 200 && stack.served_verb_from("LIST", "cache").await >= 1 {
            break;
        }
        assert!(Instant::now() < until, "the cache never synced after the outage");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
