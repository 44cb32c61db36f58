//! The client listener's limits (issue 13), as kube-apiserver's own `http.Server` has them
//! (k8s.io/apiserver `SecureServingInfo.Serve`: ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes)
//! plus a connection cap, on both HTTP/1.1 servers (the lean one and hyper):
//!
//! - a client that never finishes its request head (slow loris) is closed after the header
//!   timeout, without an answer, while other clients are served meanwhile;
//! - an idle keep-alive connection is closed after the idle timeout (not the header timeout);
//! - a head over the limit gets 431 Request Header Fields Too Large;
//! - at the connection cap, a further client is not served until a connection closes, then
//!   it is; the metrics say so.

use kubeplex_test_support as support;

use std::net::SocketAddr;
use std::time::Duration;

use kubeplex::serve::guardrails::Guardrails;
use kubeplex::serve::{Http1Server, Proxy};
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use support::stack::default_caches;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const IDLE: Duration = Duration::from_secs(2);

async fn sim() -> Sim {
    let shape = ClusterShape { nodes: 1, namespaces: 1, pods: 2, configmaps: 2, services: 0 };
    SimBuilder::new().seed(seed::cluster(shape)).start().await.unwrap()
}

async fn kubeplex(sim: &Sim, http1: Http1Server, g: Guardrails) -> Proxy {
    let dir = std::env::temp_dir().join(format!("kubeplex-limits-{}", sim.addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let upstream = Upstream::new(UpstreamConfig::resolve(Some(&kc), None).unwrap()).unwrap();
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let registry = prometheus::Registry::new();
    let caches = default_caches(&[]);
    Proxy::builder(upstream, caches)
        .listen(local)
        .admin(local)
        .http1(http1)
        .guardrails(g)
        .registry(registry)
        .start()
        .await
        .unwrap()
}

fn limits() -> Guardrails {
    Guardrails { header_read_timeout: HEADER_TIMEOUT, idle_timeout: IDLE, ..Guardrails::default() }
}

fn scrape(proxy: &Proxy, name: &str) -> u64 {
    String::from_utf8_lossy(&proxy.state.metrics.render())
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// Reads until the server closes the connection, at most `within`; the bytes, or `None` if it
/// stayed open.
async fn until_closed(conn: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    tokio::time::timeout(within, conn.read_to_end(&mut out)).await.ok().map(|_| out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_closed_after_the_header_timeout_while_others_are_served() {
    let sim = sim().await;
    for http1 in [Http1Server::Lean, Http1Server::Hyper] {
        let proxy = kubeplex(&sim, http1, limits()).await;
        let addr = proxy.addr.to_string();
        let mut slow = TcpStream::connect(&addr).await.unwrap();
        slow.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: k\r\n").await.unwrap();
        let started = Instant::now();
        // Others are served meanwhile.
        assert_eq!(get(&addr, "/api/v1/namespaces?resourceVersion=0").await.status, 200);
        let answer = until_closed(&mut slow, HEADER_TIMEOUT * 5).await;
        let took = started.elapsed();
        assert_eq!(answer, Some(Vec::new()), "{http1:?}: closed without an answer");
        assert!(took >= HEADER_TIMEOUT - Duration::from_millis(100), "{http1:?}: {took:?}");
        proxy.shutdown(Duration::from_secs(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let sim = sim().await;
    for http1 in [Http1Server::Lean, Http1Server::Hyper] {
        let proxy = kubeplex(&sim, http1, limits()).await;
        let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
        let req = b"GET /api/v1/namespaces?resourceVersion=0 HTTP/1.1\r\nHost: k\r\n\r\n";
        conn.write_all(req).await.unwrap();
        let answered = Instant::now();
        let bytes = until_closed(&mut conn, IDLE * 4).await.expect("closed while idle");
        let took = answered.elapsed();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{http1:?}: {text}");
        // Both wait the idle timeout, longer than the header timeout, as Go's server does.
        assert!(took >= IDLE - Duration::from_millis(100), "{http1:?}: closed after {took:?}");
        proxy.shutdown(Duration::from_secs(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_the_limit_gets_431_and_kubeplex_stays_up() {
    let sim = sim().await;
    for http1 in [Http1Server::Lean, Http1Server::Hyper] {
        let g = Guardrails { max_header_bytes: 16 * 1024, ..limits() };
        let proxy = kubeplex(&sim, http1, g).await;
        let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
        let big = format!(
            "GET /api/v1/namespaces HTTP/1.1\r\nHost: k\r\nX-Big: {}\r\n\r\n",
            "a".repeat(20_000)
        );
        conn.write_all(big.as_bytes()).await.unwrap();
        let bytes = until_closed(&mut conn, Duration::from_secs(5)).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{http1:?}: {text}"
        );
        // Within the limit is served.
        let addr = proxy.addr.to_string();
        assert_eq!(get(&addr, "/api/v1/namespaces?resourceVersion=0").await.status, 200);
        proxy.shutdown(Duration::from_secs(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_a_new_client_waits_until_one_closes() {
    let sim = sim().await;
    let g =
        Guardrails { max_connections: 2, header_read_timeout: Duration::from_secs(30), ..limits() };
    let proxy = kubeplex(&sim, Http1Server::Lean, g).await;
    let first = TcpStream::connect(proxy.addr).await.unwrap();
    let _second = TcpStream::connect(proxy.addr).await.unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while scrape(&proxy, "kubeplex_client_connections") < 2 {
        assert!(Instant::now() < until, "the first two were never accepted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The third connects (the kernel's backlog) but is not served...
    let mut third = TcpStream::connect(proxy.addr).await.unwrap();
    let req = b"GET /api/v1/namespaces?resourceVersion=0 HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n";
    third.write_all(req).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "served over the cap");
    assert!(scrape(&proxy, "kubeplex_client_connection_cap_reached_total") >= 1);
    assert_eq!(scrape(&proxy, "kubeplex_client_connections"), 2);
    // ... until one of the first two closes.
    drop(first);
    let bytes = until_closed(&mut third, Duration::from_secs(5)).await.expect("served");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    proxy.shutdown(Duration::from_secs(2)).await;
}
