//! A smoke run of `kubeplex-bench` (tiny sizes) in every mode, against the fake apiserver and
//! against kubeplex in front of it: the figures it prints are there and make sense.

use kubeplex_test_support as support;

use std::process::Stdio;
use std::time::Duration;

use kubeplex_sim::seed::ClusterShape;
use serde_json::Value;
use support::stack::Stack;

/// Runs the tool with `--json`; returns every JSON document it printed.
async fn bench(server: &str, args: &[&str]) -> Vec<Value> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubeplex-bench"));
    cmd.arg("--server").arg(format!("http://{server}")).arg("--json").args(args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("kubeplex-bench finished in time")
        .expect("kubeplex-bench ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubeplex-bench {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON report per line")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_runs_against_the_apiserver_and_against_kubeplex() {
    let shape = ClusterShape { nodes: 2, namespaces: 1, pods: 4, configmaps: 1, services: 1 };
    let stack = Stack::new(shape, &["pods", "configmaps"]).await;
    let (kubeplex, apiserver) = (stack.addr(), stack.upstream());
    let metrics = format!("http://{apiserver}/metrics");

    let seeded = bench(
        &apiserver,
        &["seed", "--kind", "pods", "--count", "30", "--size", "4000", "--nodes", "3"],
    )
    .await;
    assert_eq!(seeded[0]["created"], 30);
    let again =
        bench(&kubeplex, &["seed", "--kind", "pods", "--count", "30", "--nodes", "3"]).await;
    assert_eq!((again[0]["created"].as_u64(), again[0]["existing"].as_u64()), (Some(0), Some(30)));
    bench(&apiserver, &["seed", "--kind", "configmaps", "--count", "5"]).await;

    for server in [&kubeplex, &apiserver] {
        for extra in [
            &["--rv", "zero"][..],
            &["--rv", "unset", "--gzip"],
            &["--rv", "paged", "--limit", "7", "--protobuf"],
        ] {
            let mut args = vec!["list", "--clients", "2", "--requests", "6", "--duration", "20"];
            args.extend_from_slice(extra);
            let r = &bench(server, &args).await[0];
            assert_eq!(r["lists"], 6, "{server} {extra:?}: {r}");
            assert_eq!(r["errors"], 0, "{r}");
            assert!(r["bytes_per_list"].as_u64().unwrap_or(0) > 30 * 1000, "{r}");
            assert!(r["latency"]["p99_ms"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        }
    }

    // Through kubeplex: every event delivered, and the upstream sees writes but no watches.
    let reports = bench(
        &kubeplex,
        &[
            "--upstream-metrics",
            &metrics,
            "watch",
            "--watchers",
            "20",
            "--rate",
            "20",
            "--duration",
            "1",
            "--objects",
            "5",
            "--settle",
            "10",
        ],
    )
    .await;
    let r = &reports[0];
    assert_eq!(r["watchers_failed"], 0, "{r}");
    assert_eq!(r["events_written"], 20, "{r}");
    assert_eq!(r["events_expected"], 400, "{r}");
    assert_eq!(r["events_lost"], 0, "{r}");
    assert_eq!(r["out_of_order"], 0, "{r}");
    assert_eq!(r["latency"]["count"], 400, "{r}");
    let calls = &reports[1]["calls"];
    assert_eq!(calls.get("WATCH"), None, "no watch reached the upstream: {calls}");
    assert_eq!(calls["PATCH"], 20, "{calls}");

    // The same over two shared HTTP/2 connections.
    let r = &bench(
        &kubeplex,
        &[
            "watch",
            "--h2-connections",
            "2",
            "--watchers",
            "20",
            "--rate",
            "20",
            "--duration",
            "1",
            "--objects",
            "5",
            "--settle",
            "10",
        ],
    )
    .await[0];
    assert_eq!(
        (r["events_expected"].as_u64(), r["events_lost"].as_u64()),
        (Some(400), Some(0)),
        "{r}"
    );

    // Directly, with a node's field selector and the server's RSS read from /proc.
    let pid = std::process::id().to_string();
    let r = &bench(
        &apiserver,
        &[
            "watch",
            "--kind",
            "pods",
            "--watchers",
            "4",
            "--rate",
            "30",
            "--duration",
            "1",
            "--objects",
            "30",
            "--nodes",
            "3",
            "--field-selector",
            "spec.nodeName=node-1",
            "--pid",
            &pid,
            "--settle",
            "10",
        ],
    )
    .await[0];
    assert_eq!(r["events_expected"], 4 * 10, "a third of the pods are on node-1: {r}");
    assert_eq!(r["events_lost"], 0, "{r}");
    assert!(r["rss_watching_bytes"].as_u64().unwrap_or(0) > 0, "{r}");

    let reports =
        bench(&kubeplex, &["--upstream-metrics", &metrics, "upstream-calls", "--clients", "10"])
            .await;
    assert_eq!(reports[0]["lists"], 10);
    assert_eq!(reports[1]["watchers"], 10);
    let calls = &reports[2]["calls"];
    assert_eq!(calls.get("WATCH"), None, "{calls}");

    bench(&kubeplex, &["cleanup", "--kind", "pods"]).await;
    let left = support::get(&apiserver, "/api/v1/namespaces/bench/pods").await.json();
    assert_eq!(left["items"].as_array().map(Vec::len), Some(0));
}

/// The upstream's list+watch requests for `resource` in a mix report.
fn upstream_of(report: &Value, resource: &str) -> i64 {
    let verbs = &report["upstream"][resource];
    verbs["LIST"].as_i64().unwrap_or(0) + verbs["WATCH"].as_i64().unwrap_or(0)
}

/// Every client class of a mix report synced without errors.
fn all_synced(report: &Value) {
    for class in report["classes"].as_array().expect("classes") {
        assert_eq!(class["errors"], 0, "{class}");
        assert_eq!(class["synced"], class["clients"], "{class}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_mix_reaches_the_upstream_once_per_cache_through_kubeplex() {
    // No cache preloaded: the mix is a cold start for kubeplex too.
    let shape = ClusterShape { nodes: 4, namespaces: 1, pods: 12, configmaps: 2, services: 2 };
    let stack = Stack::new(shape, &[]).await;
    let (kubeplex, apiserver) = (stack.addr(), stack.upstream());
    let metrics = format!("http://{apiserver}/metrics");
    let admin = format!("http://{}/metrics", stack.proxy.admin_addr.expect("admin"));
    bench(&apiserver, &["seed", "--kind", "pods", "--count", "8", "--nodes", "4"]).await;
    let mix = [
        "mix",
        "--nodes",
        "4",
        "--agents",
        "2",
        "--kubectl",
        "2",
        "--writes-per-second",
        "4",
        "--objects",
        "8",
    ];

    // Directly: every client request is one upstream request.
    let mut args = vec!["--upstream-metrics", &metrics];
    args.extend_from_slice(&mix);
    args.extend_from_slice(&["--duration", "2"]);
    let direct = &bench(&apiserver, &args).await[0];
    all_synced(direct);
    assert_eq!(direct["writes"], 8, "{direct}");
    let clients = direct["client_lists"].as_i64().unwrap_or(0)
        + direct["client_watches"].as_i64().unwrap_or(0);
    // 4 kubelets' WatchLists, 4 kube-proxies' 2, a list and a watch for each of 2 agents and
    // the ConfigMap informer, 2 kubectl lists of one page.
    assert_eq!(clients, 4 + 4 * 2 + 3 * 2 + 2, "{direct}");
    let upstream: i64 = ["pods", "services", "endpointslices", "configmaps"]
        .iter()
        .map(|r| upstream_of(direct, r))
        .sum();
    assert_eq!(upstream, clients, "{direct}");
    assert_eq!(upstream_of(direct, "services"), 4, "one WatchList per kube-proxy: {direct}");
    assert_eq!(direct["offload_ratio"], 1.0, "{direct}");

    // Through kubeplex: the upstream sees each cache's own list+watch (or WatchList) and the
    // freshness proofs' calls; nothing passed through but the lists that were a cold cache's
    // first load (`live::reflector::fed`, counted as the cache's `reader_list` too).
    let mut args = vec![
        "--upstream-metrics",
        &metrics,
        "mix",
        "--writer-server",
        &apiserver,
        "--proxy-metrics",
        &admin,
    ];
    args.extend_from_slice(&mix[1..]);
    // Long enough for a quiet resource's freshness probe (its bookmark comes 1–2 s in).
    args.extend_from_slice(&["--duration", "4"]);
    let through = &bench(&kubeplex, &args).await[0];
    all_synced(through);
    assert_eq!(through["writes"], 16, "{through}");
    let proxy = through["proxy_calls"].as_object().expect("kubeplex's calls");
    for (key, n) in proxy.iter().filter(|(k, _)| k.ends_with("passed through")) {
        let resource = key.split(' ').next().unwrap_or_default();
        let fed: i64 = proxy
            .iter()
            .filter(|(k, _)| k.split(['/', '.']).next() == Some(resource))
            .filter(|(k, _)| k.ends_with(" reader_list"))
            .filter_map(|(_, n)| n.as_i64())
            .sum();
        assert!(key.ends_with("LIST passed through"), "{key}: {through}");
        assert_eq!(n.as_i64(), Some(fed), "{key}: only lists that fed a cache: {through}");
    }
    // The caches the mix needs, by resource: pods in JSON (agents, kubectl's Tables: every
    // pod) and in protobuf, one per node (each kubelet's `spec.nodeName`: a cache of every pod
    // for each node would cost the upstream more than its kubelet directly); services and
    // endpointslices in protobuf (kube-proxy's selector); configmaps in JSON.
    for (resource, caches) in
        [("pods", 1 + 4), ("services", 1), ("endpointslices", 1), ("configmaps", 1)]
    {
        let of = |key: &&String| {
            key.split(['/', '.', ' ']).next() == Some(resource) && !key.ends_with("passed through")
        };
        let calls: i64 = proxy.iter().filter(|(k, _)| of(k)).filter_map(|(_, n)| n.as_i64()).sum();
        let proofs: i64 = proxy
            .iter()
            .filter(|(k, _)| of(k) && k.contains(" proof_"))
            .filter_map(|(_, n)| n.as_i64())
            .sum();
        let upstream = upstream_of(through, resource);
        assert!(
            calls - proofs <= 2 * caches,
            "{resource}: {calls} calls, {proofs} proofs: {through}"
        );
        assert_eq!(
            upstream, calls,
            "{resource}: every upstream list/watch is kubeplex's own: {through}"
        );
    }
    assert!(through["offload_ratio"].as_f64().unwrap_or(0.0) > 1.0, "{through}");
}
