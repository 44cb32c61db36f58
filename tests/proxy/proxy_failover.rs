//! A node tier's upstreams (issue 21, part 2): a pool tier first, the apiserver last. When the
//! pool goes away the node tier goes on through the apiserver, resuming its watches by
//! resourceVersion; when the pool comes back the node tier moves back to it within 30 s. Its
//! clients' watches never see an event lost, twice or out of order.
//!
//! The fake apiserver sends bookmarks every 60 s, as kube-apiserver does: a quiet resource's
//! watch at the node tier stays at an RV from before the pool's return, which the returned
//! pool (its caches started after it) has no history from — that watch must still come back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubeplex::serve::Proxy;
use kubeplex::upstream::{PreferredServer, ServerUrl, Upstream, UpstreamConfig};
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use kubeplex_test_support as support;
use support::stack::{default_caches, wait_ready, Stack};
use support::watchers::*;

/// What both tiers cache: pods (the churn writes them) and configmaps (quiet).
const CACHED: &[&str] = &["pods", "configmaps"];

const SHAPE: ClusterShape =
    ClusterShape { nodes: 3, namespaces: 2, pods: 20, configmaps: 4, services: 0 };

/// kubeplex in front of the fake apiserver caching [`CACHED`], on `listen` — or, with `pool`,
/// in front of that first.
async fn start(stack: &Stack, listen: SocketAddr, pool: Option<SocketAddr>) -> Proxy {
    let config = UpstreamConfig::resolve(Some(&stack.dir.join("upstream.kubeconfig")), None)
        .expect("config")
        .with_preferred(
            pool.map(|pool| PreferredServer {
                server: ServerUrl::parse(&format!("http://{pool}"), false).expect("url"),
                ca_pem: None,
                client_cert: None,
            })
            .into_iter()
            .collect(),
        );
    let proxy = Proxy::builder(Upstream::new(config).expect("client"), default_caches(CACHED))
        .listen(listen)
        .admin("127.0.0.1:0".parse().expect("addr"))
        .start()
        .await
        .expect("kubeplex");
    wait_ready(&proxy).await;
    proxy
}

/// A pool tier on `listen`.
async fn pool(stack: &Stack, listen: SocketAddr) -> Proxy {
    start(stack, listen, None).await
}

/// A node tier whose upstreams are `pool`, then the fake apiserver.
async fn node_tier(stack: &Stack, pool: SocketAddr) -> Proxy {
    start(stack, "127.0.0.1:0".parse().expect("addr"), Some(pool)).await
}

async fn metrics(proxy: &Proxy) -> String {
    let admin = proxy.admin_addr.expect("admin").to_string();
    String::from_utf8_lossy(&support::get(&admin, "/metrics").await.body).into_owned()
}

/// Which upstream the node tier uses now, from its metrics.
async fn active_upstream(proxy: &Proxy) -> Option<String> {
    let text = metrics(proxy).await;
    text.lines()
        .filter(|l| l.starts_with("kubeplex_upstream_active{") && l.ends_with(" 1"))
        .find_map(|l| Some(l.split('"').nth(1)?.to_string()))
}

/// Watches open at the fake apiserver.
fn apiserver_watches(stack: &Stack) -> i64 {
    stack
        .sim
        .metrics_text()
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tier_goes_to_the_apiserver_while_the_pool_is_down_and_back_when_it_returns() {
    let _ = tracing_subscriber::fmt().with_env_filter("kubeplex=info").try_init();
    let builder = SimBuilder::new();
    // The stack's own kubeplex caches nothing and is not used: the tiers are built here.
    let stack = Arc::new(Stack::with_sim(builder, SHAPE, &[]).await);
    seed_churn_pods(&stack.sim);
    let pool_addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        probe.local_addr().expect("addr")
    };
    let first_pool = pool(&stack, pool_addr).await;
    let node = node_tier(&stack, pool_addr).await;
    let pool_url = format!("http://{pool_addr}");
    assert_eq!(active_upstream(&node).await.as_deref(), Some(pool_url.as_str()));
    // Through the pool: the apiserver holds the pool's two watches only.
    assert_eq!(apiserver_watches(&stack), 2, "{}", stack.sim.metrics_text());

    let node_addr = node.addr.to_string();
    let specs = [
        ("/api/v1/pods", ""),
        ("/api/v1/namespaces/team-0/pods", ""),
        ("/api/v1/pods", "labelSelector=phase%3Da"),
        ("/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode-1"),
        ("/api/v1/configmaps", ""),
    ];
    let informers: Vec<Arc<Informer>> =
        specs.iter().map(|(c, s)| Arc::new(Informer::new(&node_addr, c, s))).collect();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = informers
        .iter()
        .map(|i| {
            let (i, stop) = (i.clone(), stop.clone());
            tokio::spawn(async move { i.run(stop).await })
        })
        .collect();
    let listed = eventually(Duration::from_secs(10), || async {
        informers.iter().all(|i| i.seen.lock().map(|s| s.sessions > 0).unwrap_or(false))
    })
    .await;
    assert!(listed, "informers did not start watching");

    let secs = Duration::from_secs;
    let churn = spawn_churn(stack.clone(), secs(12), Duration::from_millis(10));
    tokio::time::sleep(secs(2)).await;
    // The pool goes away as a killed process does: its listener and every connection end.
    drop(first_pool);
    let away = eventually(secs(10), || async {
        active_upstream(&node).await == Some(format!("http://{}", stack.upstream()))
    })
    .await;
    assert!(away, "the node tier did not go to the apiserver: {:?}", active_upstream(&node).await);
    tokio::time::sleep(secs(3)).await;
    // The pool returns on the same address, with nothing cached yet from before.
    let second_pool = pool(&stack, pool_addr).await;
    let returned = Instant::now();
    let back = eventually(secs(30), || async {
        active_upstream(&node).await.as_deref() == Some(pool_url.as_str())
    })
    .await;
    let took = returned.elapsed();
    assert!(back, "the node tier did not come back to the pool within 30 s");
    // Its watches moved too, the quiet one included: the apiserver is left with the pool's.
    let moved = eventually(secs(30), || async { apiserver_watches(&stack) == 2 }).await;
    let moved_after = returned.elapsed();
    assert!(moved, "watches at the apiserver: {}", apiserver_watches(&stack));
    let writes = tokio::time::timeout(secs(40), churn).await.expect("churn ends").expect("join");

    let settled = settle(&stack, &informers, secs(30)).await;
    stop_tx.send_replace(true);
    for t in tasks {
        tokio::time::timeout(secs(10), t).await.expect("informer stops").expect("join");
    }
    let node_metrics = metrics(&node).await;
    let switches: Vec<_> = node_metrics
        .lines()
        .filter(|l| l.starts_with("kubeplex_upstream_switches_total"))
        .collect();
    println!(
        "{writes} writes; back on the pool {took:?} after it returned, every watch {moved_after:?}; {switches:?}\n{}",
        settled.report.join("\n")
    );
    assert!(settled.converged && settled.problems.is_empty(), "{}", settled.problems.join("\n"));
    assert!(writes > 100, "the churn ran: {writes} writes");
    // Through the outage the clients' watches went on from the node tier's cache: none had to
    // list again.
    let relists: usize =
        informers.iter().map(|i| i.seen.lock().map(|s| s.relists).unwrap_or(0)).sum();
    assert_eq!(relists, 0, "clients relisted:\n{}", settled.report.join("\n"));
    drop(second_pool);
}

/// A write whose pool cannot be reached — its replica killed, its address refusing connections —
/// goes to the next upstream: nothing of it was sent (no connection was made), so it is as safe
/// to send again as a read, and an agent's event or status write does not fail because a pool
/// replica is restarting. It is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_pool_cannot_be_reached_goes_to_the_apiserver_once() {
    let stack = Stack::with_sim(SimBuilder::new(), SHAPE, &[]).await;
    let gone = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        probe.local_addr().expect("addr")
    };
    let node = node_tier(&stack, gone).await;
    let addr = node.addr.to_string();
    let json = [("Content-Type", "application/json"), ("Accept", "application/json")];
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"written-once","namespace":"team-0"},"data":{"k":"v"}}"#;
    let path = "/api/v1/namespaces/team-0/configmaps";
    let created =
        support::request(&addr, http::Method::POST, path, &json, Some(body.to_vec())).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let stored = stack.sim.get("", "configmaps", "team-0", "written-once").expect("written");
    assert_eq!(stored["data"]["k"], "v");
    // A patch with its body, and a second create of the same name: the apiserver's answers.
    let merge = [("Content-Type", "application/merge-patch+json"), ("Accept", "application/json")];
    let patch = br#"{"data":{"k":"w"}}"#.to_vec();
    let object = format!("{path}/written-once");
    let patched = support::request(&addr, http::Method::PATCH, &object, &merge, Some(patch)).await;
    assert_eq!(patched.status, 200, "{}", String::from_utf8_lossy(&patched.body));
    assert_eq!(
        stack.sim.get("", "configmaps", "team-0", "written-once").unwrap()["data"]["k"],
        "w"
    );
    let again = support::request(&addr, http::Method::POST, path, &json, Some(body.to_vec())).await;
    assert_eq!(again.status, 409, "{}", String::from_utf8_lossy(&again.body));
}

/// A pool replica with `listenWhenReady` refuses connections until its caches are loaded, so
/// that a node tier coming back to it (its failover probe connects) finds it only once it can
/// answer from them; one without it accepts at once and passes reads on while it loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_listens_when_ready_refuses_connections_until_its_caches_are_loaded() {
    let stack = Stack::with_sim(SimBuilder::new(), SHAPE, &[]).await;
    let config = || {
        UpstreamConfig::resolve(Some(&stack.dir.join("upstream.kubeconfig")), None).expect("config")
    };
    let local: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    // The upstream holds every request: the caches cannot load.
    stack.sim.stall(true);
    let start = |when_ready: bool| {
        Proxy::builder(Upstream::new(config()).expect("client"), default_caches(CACHED))
            .listen(local)
            .listen_when_ready(when_ready)
            .admin(local)
            .start()
    };
    let held = start(true).await.expect("kubeplex");
    let at_once = start(false).await.expect("kubeplex");
    let connects = |addr: SocketAddr| async move {
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
            .await
            .is_ok_and(|c| c.is_ok())
    };
    for _ in 0..4 {
        assert!(!connects(held.addr).await, "listening before its caches loaded");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(connects(at_once.addr).await, "without listenWhenReady it listens at once");
    // Once the upstream answers and the caches load, it listens and serves them; its
    // readiness passes no sooner than its port accepts connections (a pool's node tiers, or
    // a Service's endpoints, follow /readyz).
    let admin = held.admin_addr.expect("admin").to_string();
    assert_eq!(support::get(&admin, "/readyz").await.status, 503);
    stack.sim.stall(false);
    let deadline = Instant::now() + Duration::from_secs(20);
    while support::get(&admin, "/readyz").await.status != 200 {
        assert!(Instant::now() < deadline, "never ready after its caches loaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(connects(held.addr).await, "ready before it listened");
    let list = support::get(&held.addr.to_string(), "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(list.status, 200, "{}", String::from_utf8_lossy(&list.body));
    let text = String::from_utf8_lossy(&support::get(&admin, "/metrics").await.body).into_owned();
    let from_cache = text.lines().any(|l| {
        l.starts_with("kubeplex_requests_total{")
            && l.contains("source=\"cache\"")
            && l.contains("verb=\"LIST\"")
            && !l.ends_with(" 0")
    });
    assert!(from_cache, "the list was not answered from the cache:\n{text}");
}
