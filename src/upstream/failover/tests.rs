use super::*;

#[test]
fn an_address_gets_the_schemes_port() {
    let a: http::uri::Authority = "pool.kube-system.svc".parse().unwrap();
    assert_eq!(address(&a, true), "pool.kube-system.svc:443");
    let a: http::uri::Authority = "[::1]:8443".parse().unwrap();
    assert_eq!(address(&a, false), "[::1]:8443");
}

#[tokio::test]
async fn the_next_one_takes_over_and_the_first_returns_once_it_accepts() {
    let first = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let first_addr = first.local_addr().unwrap().to_string();
    drop(first);
    let failover = Arc::new(Failover::new(vec![
        ("http://first".into(), first_addr.clone()),
        ("http://second".into(), "127.0.0.1:1".into()),
    ]));
    // The last one is never left for a later one that does not exist.
    assert_eq!(failover.unreachable(1, &"refused"), 1);
    assert_eq!(failover.active(), 0);
    assert_eq!(failover.unreachable(0, &"refused"), 1);
    assert_eq!(failover.active(), 1);
    // Not listening: it stays away.
    assert!(!failover.probe_once().await);
    let _listening = tokio::net::TcpListener::bind(&first_addr).await.unwrap();
    assert!(failover.probe_once().await);
    assert_eq!(failover.active(), 0);
    let registry = Registry::new();
    failover.register(&registry).unwrap();
    let mut text = Vec::new();
    prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut text)
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("kubeplex_upstream_active{server=\"http://first\"} 1"), "{text}");
    assert!(text.contains("kubeplex_upstream_active{server=\"http://second\"} 0"), "{text}");
    assert!(text.contains("kubeplex_upstream_switches_total{direction=\"away\"} 1"), "{text}");
    assert!(text.contains("kubeplex_upstream_switches_total{direction=\"back\"} 1"), "{text}");
}
