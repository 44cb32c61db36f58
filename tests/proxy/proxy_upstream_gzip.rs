//! kubeplex asks its upstream for gzip as Go clients do: the apiserver then writes a large list
//! compressed (over 128 KiB, at level 1), and — kube-apiserver 1.37's WatchListCompression — a
//! streaming list as one gzip member per flush. The cache holds what a direct read gets either
//! way, and the apiserver writes a fraction of the bytes.

use std::time::{Duration, Instant};

use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{SimBuilder, SimConfig};
use kubeplex_test_support as support;
use serde_json::Value;
use support::stack::Stack;
use support::*;

const SHAPE: ClusterShape =
    ClusterShape { nodes: 3, namespaces: 3, pods: 300, configmaps: 0, services: 0 };

/// The names of a list's items, in order.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| format!("{}/{}", i["metadata"]["namespace"], i["metadata"]["name"]))
        .collect()
}

/// `apiserver_response_sizes_sum` of `verb` for pods: what the (fake) apiserver wrote.
fn bytes_written(stack: &Stack, verb: &str) -> u64 {
    stack
        .sim
        .metrics_text()
        .lines()
        .filter(|l| l.starts_with("apiserver_response_sizes_sum{"))
        .filter(|l| l.contains("resource=\"pods\"") && l.contains(&format!("verb=\"{verb}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn a_cache_loaded_by_a_list_reads_it_compressed() {
    // An upstream without streaming lists: the cache loads by paged LIST.
    let config = SimConfig { watch_list: false, ..SimConfig::default() };
    let stack = Stack::with_sim(SimBuilder::new().config(config), SHAPE, &["pods"]).await;
    let direct = get(&stack.upstream(), "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(direct.status, 200);
    assert!(direct.body.len() > 128 * 1024, "a list the apiserver compresses");
    let written = bytes_written(&stack, "LIST");
    // The direct list above, uncompressed (no Accept-Encoding), counts in full.
    let by_kubeplex = written - direct.body.len() as u64;
    assert!(
        by_kubeplex * 4 < direct.body.len() as u64,
        "kubeplex's list cost {by_kubeplex} bytes, the uncompressed list is {}",
        direct.body.len()
    );
    let cached = get(&stack.addr(), "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(cached.status, 200);
    assert_eq!(names(&cached.json()), names(&direct.json()));
    assert_eq!(cached.json()["items"], direct.json()["items"]);
}

#[tokio::test]
async fn a_streaming_list_compressed_one_member_per_flush_loads_and_keeps_watching() {
    let stack =
        Stack::with_sim(SimBuilder::new().watch_list_compression(true), SHAPE, &["pods"]).await;
    // The cache loaded by the one streaming list, never a paged list besides.
    assert_eq!(stack.upstream_calls_of("pods", "LIST"), 0);
    // The fake apiserver answers a streaming list that accepts gzip as 1.37 does.
    let raw = request(
        &stack.upstream(),
        http::Method::GET,
        "/api/v1/namespaces/team-1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
        &[("Accept", "application/json"), ("Accept-Encoding", "gzip")],
        None,
    )
    .await;
    assert_eq!(raw.headers["content-encoding"], "gzip");
    let text = kubeplex::wire::gzip::gunzip(&raw.body, 64 << 20).expect("gzip members");
    let text = String::from_utf8(text).expect("utf-8");
    assert!(text.lines().count() > 1, "{text}");
    assert!(text.contains("k8s.io/initial-events-end"), "{text}");
    // kubeplex's cache, loaded from such a stream, holds what the apiserver does...
    let direct = get(&stack.upstream(), "/api/v1/pods?resourceVersion=0").await;
    let cached = get(&stack.addr(), "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(cached.json()["items"], direct.json()["items"]);
    // ... and follows the same stream's later events.
    stack.sim.create(seed::pod("team-2", 9_999, 3)).expect("create");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let cached = get(&stack.addr(), "/api/v1/pods?resourceVersion=0").await;
        if names(&cached.json()).len() == SHAPE.pods + 1 {
            break;
        }
        assert!(Instant::now() < until, "the new pod never reached the cache");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
