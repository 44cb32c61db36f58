//! Caches limited to one namespace (`cacheNamespace`): a sidecar whose ServiceAccount has a Role
//! in its own namespace, not a ClusterRole, as least privilege asks. Cluster-wide caches cannot
//! list with it (the apiserver refuses the cluster-wide list), so every read passes through;
//! limited to the namespace, the caches list and watch that namespace's collections, its reads
//! come from the cache with the apiserver's bytes, and what reaches past it (another namespace,
//! all namespaces) still goes to the apiserver, which refuses it as it refuses the pod.

use kubeplex_test_support as support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::Method;
use kubeplex::live::caches::CachesConfig;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::auth::{Auth, Rule, Subject};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::json;
use support::stack::default_caches;
use support::watchers::*;
use support::*;

const TOKEN: &str = "app-sa-token";
const JSON: &str = "application/json";

/// The pod's ServiceAccount team-0/app may read configmaps and pods in team-0, nothing else.
fn policy() -> Auth {
    Auth::new().service_account_token(TOKEN, "team-0", "app").grant(
        Subject::service_account("team-0", "app"),
        Some("team-0"),
        vec![Rule::read(&[""], &["configmaps", "pods"])],
    )
}

fn shape() -> ClusterShape {
    ClusterShape { nodes: 2, namespaces: 2, pods: 8, configmaps: 6, services: 0 }
}

/// kubeplex as the pod's sidecar, with the pod's token, its caches limited to `namespace`.
async fn sidecar(sim: &Sim, dir: &Path, namespace: Option<&str>) -> Proxy {
    let kc = dir.join(format!("{}.kubeconfig", namespace.unwrap_or("all")));
    std::fs::write(&kc, sim.kubeconfig_with_token(TOKEN)).unwrap();
    let upstream = Upstream::new(UpstreamConfig::resolve(Some(&kc), None).unwrap()).unwrap();
    let caches = CachesConfig { namespace: namespace.map(str::to_string), ..default_caches(&[]) };
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    Proxy::builder(upstream, caches)
        .listen(local)
        .admin(local)
        .start()
        .await
        .expect("kubeplex starts")
}

/// kubeplex's `kubeplex_requests_total` for configmaps answered by `source`.
fn served(proxy: &Proxy, source: &str) -> u64 {
    String::from_utf8_lossy(&proxy.state.metrics.render())
        .lines()
        .filter(|l| l.starts_with("kubeplex_requests_total{"))
        .filter(|l| {
            l.contains("resource=\"configmaps\"") && l.contains(&format!("source=\"{source}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A read straight from the fake apiserver, as the pod's ServiceAccount.
async fn direct(sim: &Sim, path: &str) -> Resp {
    let bearer = format!("Bearer {TOKEN}");
    let headers = [("Authorization", bearer.as_str()), ("Accept", JSON)];
    request(&sim.addr().to_string(), Method::GET, path, &headers, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_limited_to_the_pods_namespace_serve_it_with_a_role_and_pass_the_rest_through() {
    let sim = SimBuilder::new().seed(seed::cluster(shape())).auth(policy()).start().await.unwrap();
    let dir = TempDir(std::env::temp_dir().join(format!("kubeplex-scope-{}", sim.addr().port())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let own = "/api/v1/namespaces/team-0/configmaps?resourceVersion=0";

    // Without a namespace limit, a read of one namespace starts a cache of that namespace alone
    // (never a wider one: `live::caches`, "What a cache may cost"), which the Role fills.
    let wide = sidecar(&sim, &dir.0, None).await;
    let addr = wide.addr.to_string();
    for _ in 0..3 {
        let r = get(&addr, own).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // The first read, of the whole cache it starts, passed through: its answer was the cache's
    // first load (`live::reflector::fed`); the others were served from that cache.
    assert_eq!(served(&wide, "cache"), 2, "a read of one namespace cached for that namespace");
    assert_eq!(served(&wide, "upstream"), 1);
    // A read of every namespace would need a cluster-wide cache, which the Role cannot fill:
    // the apiserver's own 403 for kubeplex's identity, passed through.
    let refused_lists = || {
        sim.metrics_text()
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{code=\"403\""))
            .filter(|l| l.contains("resource=\"configmaps\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    let before = refused_lists();
    let all = get(&addr, "/api/v1/configmaps?resourceVersion=0").await;
    assert_eq!(all.status, 403, "{}", String::from_utf8_lossy(&all.body));
    assert_eq!(served(&wide, "cache"), 2);
    // The refused cache is stopped and not tried again for a while: the apiserver saw the
    // cache's refused load and the read's own refusal, and no list every few seconds after.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for _ in 0..3 {
        assert_eq!(get(&addr, "/api/v1/configmaps?resourceVersion=0").await.status, 403);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(refused_lists() - before, 2 + 3, "one refused load, and the reads' own refusals");
    let admin = wide.admin_addr.unwrap().to_string();
    let debug = get(&admin, "/debug/caches").await.json();
    let refused = debug["refused"].as_array().cloned().unwrap_or_default();
    assert!(
        refused.iter().any(|r| r["resource"] == "configmaps/v1" && r["reason"] == "forbidden"),
        "{debug}"
    );
    wide.shutdown(Duration::from_secs(2)).await;

    // Limited to team-0.
    let proxy = sidecar(&sim, &dir.0, Some("team-0")).await;
    let addr = proxy.addr.to_string();
    let want = direct(&sim, own).await;
    assert_eq!(want.status, 200);
    let name = items_of(&want.json()).keys().next().expect("a configmap").clone();
    let name = name.trim_start_matches("team-0/").to_string();
    let by_name = format!("/api/v1/namespaces/team-0/configmaps/{name}?resourceVersion=0");
    let labelled = "/api/v1/namespaces/team-0/configmaps?resourceVersion=0&limit=2";
    let mut reads = 0;
    for path in [own, by_name.as_str(), labelled] {
        let want = direct(&sim, path).await;
        let got = get(&addr, path).await;
        assert_eq!(got.status, 200, "{path}: {}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.body, want.body, "{path}: the apiserver's bytes");
        reads += 1;
        if reads == 1 {
            // The first read fed the cache its load, taken once the cache's own watch is
            // answered: a read of one object by name meanwhile would pass through at once.
            let caches = support::stack::caches_once_synced(&proxy).await;
            assert!(caches.iter().all(|c| c["synced"] == true), "{caches:?}");
        }
    }
    // The first, of the whole namespace, passed through and fed the cache its first load.
    assert_eq!(served(&proxy, "cache"), reads - 1, "the namespace's reads came from the cache");
    assert_eq!(served(&proxy, "upstream"), 1);
    let debug = get(&proxy.admin_addr.unwrap().to_string(), "/debug/caches").await.json();
    let cms = debug["caches"].as_array().unwrap().iter().find(|c| c["resource"] == "configmaps/v1");
    assert_eq!(cms.expect("the configmaps cache")["namespace"], "team-0", "{debug}");

    // A watch of the namespace, from the cache: its state, then a change.
    let mut w =
        watch(&addr, "/api/v1/namespaces/team-0/configmaps?watch=1&resourceVersion=0", JSON).await;
    assert_eq!(w.status, 200);
    let count = items_of(&want.json()).len();
    for _ in 0..count {
        let e = w.next_within(STEP).await.expect("initial ADDED");
        assert_eq!(e["type"], "ADDED");
    }
    sim.create(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "new-one", "namespace": "team-0"}, "data": {"k": "v"}
    }))
    .unwrap();
    let e = loop {
        let e = w.next_within(STEP).await.expect("the new configmap");
        if e["type"] != "BOOKMARK" {
            break e;
        }
    };
    assert_eq!((e["type"].as_str(), key_of(&e).as_str()), (Some("ADDED"), "team-0/new-one"));
    assert_eq!(served(&proxy, "cache"), reads);

    // Past the namespace: the apiserver's answer (its 403 for this ServiceAccount), byte for
    // byte, and never the cache's.
    let upstream_before = served(&proxy, "upstream");
    for path in [
        "/api/v1/namespaces/team-1/configmaps?resourceVersion=0",
        "/api/v1/configmaps?resourceVersion=0",
        "/api/v1/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/namespaces/team-1/configmaps/config-1?resourceVersion=0",
    ] {
        let want = direct(&sim, path).await;
        let got = get(&addr, path).await;
        assert_eq!(want.status, 403, "{path}");
        assert_eq!((got.status, &got.body), (want.status, &want.body), "{path}");
    }
    assert_eq!(served(&proxy, "upstream") - upstream_before, 4);
    assert_eq!(served(&proxy, "cache"), reads);
    proxy.shutdown(Duration::from_secs(2)).await;
}
