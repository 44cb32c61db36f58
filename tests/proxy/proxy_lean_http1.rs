//! kubeplex's client listener with the lean HTTP/1.1 server (the default) against the same
//! proxy with `--http1-server hyper`, in front of one fake apiserver: cached lists, watches
//! (initial events, the timeout's end), passed-through errors and writes give the same bytes
//! (`date` and `audit-id` values aside), and the lean server is the one that answered.

use kubeplex_test_support as support;

use std::time::Duration;

use kubeplex::cache::store::StoreLimits;
use kubeplex::live::caches::CachesConfig;
use kubeplex::serve::{Http1Server, Proxy};
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::ClusterShape;
use support::stack::{default_caches, Stack};
use support::undated;

async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    support::raw_exchange(addr, &[request.as_bytes()], Duration::ZERO).await
}

#[tokio::test]
async fn the_lean_server_answers_as_hyper_does() {
    let shape = ClusterShape { nodes: 2, namespaces: 2, pods: 10, configmaps: 8, services: 1 };
    let stack = Stack::new(shape, &["configmaps", "pods"]).await;
    let kc = stack.dir.join("upstream.kubeconfig");
    let upstream =
        Upstream::new(UpstreamConfig::resolve(Some(&kc), None).expect("config")).expect("client");
    let caches = CachesConfig {
        limits: StoreLimits { max_snapshots: 100, max_snapshot_age: Duration::from_secs(300) },
        ..default_caches(&["configmaps", "pods"])
    };
    let hyper = Proxy::builder(upstream, caches)
        .admin("127.0.0.1:0".parse().expect("addr"))
        .http1(Http1Server::Hyper)
        .start()
        .await
        .expect("proxy");
    let admin = hyper.admin_addr.expect("admin").to_string();
    let mut ready = false;
    for _ in 0..200 {
        ready = support::get(&admin, "/readyz").await.status == 200;
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "the hyper-served proxy never became ready");
    // Both caches are at the sim's state once a list at its RV is answered.
    let rv = support::get(&stack.upstream(), "/api/v1/configmaps?limit=1").await.json()["metadata"]
        ["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let lean = stack.proxy.addr;
    let close = "Host: x\r\nConnection: close\r\n\r\n";
    let requests = [
        format!("GET /api/v1/configmaps?resourceVersion={rv}&resourceVersionMatch=NotOlderThan HTTP/1.1\r\n{close}"),
        format!("GET /api/v1/namespaces/team-1/pods?resourceVersion=0&limit=3 HTTP/1.1\r\nAccept: application/json\r\n{close}"),
        format!("GET /api/v1/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1 HTTP/1.1\r\n{close}"),
        format!("GET /api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=spec.nodeName%3Dnode-1 HTTP/1.1\r\n{close}"),
        format!("GET /api/v1/namespaces/team-1/configmaps/missing?resourceVersion=0 HTTP/1.1\r\n{close}"),
        format!("GET /api/v1/configmaps?watch=1&resourceVersion=abc HTTP/1.1\r\n{close}"),
        // Two requests on one connection: a list, then a watch.
        format!("GET /api/v1/configmaps?resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1 HTTP/1.1\r\n{close}"),
    ];
    for request in &requests {
        let want = undated(&exchange(hyper.addr, request).await);
        let got = undated(&exchange(lean, request).await);
        assert_eq!(got, want, "lean (left) and hyper (right) differ for {request}");
        assert!(want.starts_with("HTTP/1.1 "), "{want}");
    }
    // The initial events came through, and the stream ended at its timeout with the last chunk.
    let watch = exchange(lean, &requests[2]).await;
    assert_eq!(watch.matches("{\"type\":\"ADDED\"").count(), 8, "{watch}");
    assert!(watch.contains("transfer-encoding: chunked\r\n") && watch.ends_with("\r\n0\r\n\r\n"));
    assert_eq!(stack.metric("kubeplex_lean_http1_requests_total").await, 9);
    assert_eq!(stack.metric("kubeplex_hyper_connections_total").await, 0);

    // A write goes to hyper on the lean listener, with the same answer.
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME","namespace":"team-1"}}"#;
    let post = |name: &str| {
        let body = body.replace("NAME", name);
        format!(
            "POST /api/v1/namespaces/team-1/configmaps HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{close}{body}",
            body.len()
        )
    };
    let want = exchange(hyper.addr, &post("via-hyper")).await;
    let got = exchange(lean, &post("via-lean")).await;
    assert!(want.starts_with("HTTP/1.1 201 Created\r\n"), "{want}");
    assert!(got.starts_with("HTTP/1.1 201 Created\r\n"), "{got}");
    assert!(got.contains("\"name\":\"via-lean\""), "{got}");
    assert_eq!(stack.metric("kubeplex_hyper_connections_total").await, 1);
}
