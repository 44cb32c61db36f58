//! Graceful shutdown (SIGTERM in `kubeplex serve`): readiness fails, the listener stops
//! accepting, open watches end cleanly (their clients resume elsewhere or after the restart),
//! requests under way get the grace period, and what is still open after it is cut.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use kubeplex_test_support as support;

async fn start() -> (Sim, Proxy, std::path::PathBuf) {
    let shape = ClusterShape { nodes: 2, namespaces: 2, pods: 10, configmaps: 6, services: 0 };
    let sim = SimBuilder::new().seed(seed::cluster(shape)).start().await.unwrap();
    let dir = std::env::temp_dir().join(format!(
        "kubeplex-shutdown-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let upstream =
        Upstream::new(UpstreamConfig::resolve(Some(&kubeconfig), None).unwrap()).unwrap();
    let mut caches = support::stack::default_caches(&["configmaps"]);
    caches.idle_timeout = Duration::from_secs(600);
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let proxy = Proxy::builder(upstream, caches).listen(local).admin(local).start().await.unwrap();
    let admin = proxy.admin_addr.unwrap().to_string();
    for _ in 0..200 {
        if support::get(&admin, "/readyz").await.status == 200 {
            return (sim, proxy, dir);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never ready");
}

const CACHED_WATCH: &str = "/api/v1/namespaces/team-0/configmaps?watch=1&resourceVersion=0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_end_cleanly_and_the_process_is_done_well_within_the_grace_period() {
    let (_sim, proxy, dir) = start().await;
    let addr = proxy.addr.to_string();
    let mut watch = support::watch(&addr, CACHED_WATCH, "application/json").await;
    assert_eq!(watch.status, 200);
    assert!(watch.next_within(Duration::from_secs(5)).await.is_some(), "the state arrives");
    let started = Instant::now();
    let shutdown = tokio::spawn(proxy.shutdown(Duration::from_secs(20)));
    assert!(watch.ends_within(Duration::from_secs(5)).await, "the watch ends");
    assert!(!watch.broken(), "at its end, not cut: the client resumes from its last RV");
    assert!(shutdown.await.unwrap(), "drained within the grace period");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // The listener is closed.
    assert!(tokio::net::TcpStream::connect(&addr).await.is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_at_once_and_requests_under_way_get_the_grace_period() {
    let (_sim, proxy, dir) = start().await;
    let addr = proxy.addr.to_string();
    let admin = proxy.admin_addr.unwrap().to_string();
    // A watch passed through to the upstream (the client has its own token) has no end
    // kubeplex can give it: it holds the shutdown for the whole grace period.
    let mut held = support::watch_with(
        &addr,
        "/api/v1/namespaces/team-0/pods?watch=1&resourceVersion=0&timeoutSeconds=60",
        &[("Accept", "application/json"), ("Authorization", "Bearer client-token")],
    )
    .await;
    assert_eq!(held.status, 200);
    assert!(held.next_within(Duration::from_secs(5)).await.is_some());
    let mut cached = support::watch(&addr, CACHED_WATCH, "application/json").await;
    assert!(cached.next_within(Duration::from_secs(5)).await.is_some());

    let grace = Duration::from_secs(2);
    let started = Instant::now();
    let shutdown = tokio::spawn(proxy.shutdown(grace));
    // The shutdown runs in its own task: poll (bounded) for what it does first.
    let mut ready = support::get(&admin, "/readyz").await;
    for _ in 0..40 {
        if ready.status == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        ready = support::get(&admin, "/readyz").await;
    }
    assert_eq!((ready.status, &ready.body[..]), (503, &b"shutting down"[..]));
    let mut refused = false;
    for _ in 0..40 {
        if tokio::net::TcpStream::connect(&addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(refused, "no new connections");
    assert!(cached.ends_within(Duration::from_secs(1)).await && !cached.broken());
    // The passed-through watch goes on until the grace period ends, then is cut.
    assert!(!held.ends_within(Duration::from_millis(500)).await, "still open within the grace");
    assert!(!shutdown.await.unwrap(), "not drained: cut at the end of the grace period");
    let took = started.elapsed();
    assert!(took >= grace && took < grace + Duration::from_secs(3), "{took:?}");
    assert!(held.ends_within(Duration::from_secs(2)).await);
    let _ = std::fs::remove_dir_all(dir);
}
