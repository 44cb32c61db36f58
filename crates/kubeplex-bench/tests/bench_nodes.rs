//! A smoke run of `kubeplex-bench nodes` (2 nodes, a few seconds) in its three modes: directly
//! against its fake apiserver, through two kubeplex processes in node mode with the shipped
//! node configuration, and through those in front of a pool tier of two replicas with the
//! shipped pool configuration, one of them killed mid-run. The figures are printed, every
//! kubelet synced, every client's final view is the apiserver's, no kubeplex cache is left
//! without watchers once the agents run (config/node.yaml starts no cache nobody reads), and
//! the node tiers went back to the killed replica once it returned.

use std::time::Duration;

use serde_json::Value;

mod support;

use support::{json_report, kubeplex_bin, root};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_scenario_runs_directly_through_a_node_tier_and_through_a_pool_tier() {
    let bin = kubeplex_bin().await;
    let root = root();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubeplex-bench"));
    cmd.arg("--json")
        .args(["nodes", "--nodes", "2", "--duration", "4", "--pod-rate", "2", "--settle", "2"])
        .args(["--service-every", "1", "--node-status-every", "2"])
        .arg("--kubeplex-bin")
        .arg(&bin)
        .arg("--node-config")
        .arg(root.join("config/node.yaml"))
        .arg("--daemonset")
        .arg(root.join("deploy/base/node/daemonset.yaml"))
        .arg("--pool-config")
        .arg(root.join("deploy/base/pool/kubeplex.yaml"))
        .arg("--pool-manifest")
        .arg(root.join("deploy/base/pool/pool.yaml"))
        .args(["--mode", "all"]);
    let report = json_report(cmd, Duration::from_secs(180)).await;
    let modes = report["modes"].as_array().expect("modes");
    assert_eq!(
        modes.iter().map(|m| m["mode"].as_str()).collect::<Vec<_>>(),
        [Some("direct"), Some("node-tier"), Some("pool")]
    );
    for m in modes {
        let mode = m["mode"].as_str().unwrap_or("?");
        let served = &m["served"];
        for figure in
            ["watch", "watch_events", "watch_event_bytes", "bytes_written", "open_watches"]
        {
            assert!(served[figure].as_i64().unwrap_or(0) > 0, "{mode}: {figure}: {served}");
        }
        // Every kubelet (each of its informers), and every other agent, synced.
        for class in m["classes"].as_array().expect("classes") {
            assert_eq!(class["synced"], class["clients"], "{mode}: {class}");
        }
        let kubelet_classes = m["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .filter(|c| c["class"].as_str().is_some_and(|n| n.starts_with("kubelet: ")))
            .count();
        assert_eq!(kubelet_classes, 6, "{mode}: {m}");
        // Pods were bound during the run and every kubelet saw its own.
        let bound = m["churn"]["pods_created"].as_u64().unwrap_or(0);
        assert!(bound >= 4, "{mode}: {}", m["churn"]);
        assert_eq!(m["binding_to_kubelet"]["count"].as_u64(), Some(bound), "{mode}");
        let views = &m["views"];
        assert!(views["checked"].as_u64().unwrap_or(0) > 20, "{mode}: {views}");
        assert_eq!(views["equal"], views["checked"], "{mode}: {views}");
        for (write, outcome) in m["writes"].as_object().expect("writes") {
            assert!(outcome["ok"].as_u64().unwrap_or(0) > 0, "{mode}: {write}: {outcome}");
            assert_eq!(outcome["failed"], 0, "{mode}: {write}: {outcome}");
        }
    }
    let direct = &modes[0];
    assert!(direct["kubeplex"].is_null());
    assert_eq!(direct["served"]["subject_access_reviews"], 0, "no reviews directly");
    let tier = &modes[1]["kubeplex"];
    let caches = tier["caches"].as_array().expect("kubeplex's caches");
    assert!(!caches.is_empty(), "{tier}");
    assert_eq!(
        tier["caches_without_watchers"],
        Value::Array(vec![]),
        "config/node.yaml must start no cache without readers: {tier}"
    );
    assert!(report["ratios"]["LIST+WATCH"].as_f64().is_some(), "{}", report["ratios"]);
    assert!(report["pool_ratios"]["LIST+WATCH"].as_f64().is_some(), "{}", report["pool_ratios"]);
    // The pool mode: a replica killed and started again, and every node tier back on it.
    let pool = &modes[2];
    assert!(!pool["pool"]["upstream_calls"].as_object().expect("the pool's calls").is_empty());
    let failover = &pool["failover"];
    assert!(failover["switches_away"].as_u64().unwrap_or(0) >= 1, "{failover}");
    let back = failover["all_back_after_s"].as_f64().expect("every node tier came back");
    assert!(back <= 30.0, "{failover}");
    assert_eq!(failover["nodes_on_first_upstream"], 2, "{failover}");
}
