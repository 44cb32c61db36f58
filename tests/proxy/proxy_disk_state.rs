//! Caches' states on disk (issue 13): a kubeplex restarted while the apiserver is unreachable
//! (a node rebooted during an outage) serves its last state from disk — the same bytes as
//! before the restart — until the apiserver answers, then converges like a relist, the
//! differences reaching open watches as events. Reads only the apiserver can answer (a
//! consistent list) are not answered from the disk state. A corrupt file is skipped.

use kubeplex_test_support as support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kubeplex::live::caches::{CachesConfig, FreshnessConfig};
use kubeplex::live::disk::DiskConfig;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::Value;
use support::stack::default_caches;
use support::watchers::*;
use support::*;
use tokio::time::Instant;

const JSON: &str = "application/json";

fn shape() -> ClusterShape {
    ClusterShape { nodes: 2, namespaces: 2, pods: 12, configmaps: 4, services: 0 }
}

/// kubeplex in front of `sim` with its states in `states`, pods and configmaps configured.
async fn kubeplex(sim: &Sim, work: &Path, states: &Path) -> Proxy {
    kubeplex_with(sim, work, states, &["pods", "configmaps"]).await
}

/// kubeplex in front of `sim` with its states in `states`, the `preload` caches configured.
async fn kubeplex_with(sim: &Sim, work: &Path, states: &Path, preload: &[&str]) -> Proxy {
    let kc = work.join("upstream.kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let upstream = Upstream::new(UpstreamConfig::resolve(Some(&kc), None).unwrap()).unwrap();
    let caches = CachesConfig {
        freshness: FreshnessConfig {
            sync_wait: Duration::from_secs(5),
            consistent_wait: Duration::from_secs(1),
            ..FreshnessConfig::default()
        },
        discovery_ttl: Duration::from_secs(1),
        disk: DiskConfig {
            dir: Some(states.to_path_buf()),
            interval: Duration::from_millis(200),
            max_bytes: 64 << 20,
        },
        ..default_caches(preload)
    };
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    Proxy::builder(upstream, caches)
        .listen(local)
        .admin(local)
        .start()
        .await
        .expect("kubeplex starts")
}

fn metrics(proxy: &Proxy) -> String {
    String::from_utf8_lossy(&proxy.state.metrics.render()).into_owned()
}

fn metric(proxy: &Proxy, name: &str, labels: &[&str]) -> u64 {
    metrics(proxy)
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Polls `ok` every 50 ms for at most `within`.
async fn eventually(within: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ok()
}

async fn debug_cache(proxy: &Proxy, resource: &str) -> Value {
    let admin = proxy.admin_addr.unwrap().to_string();
    let v = get(&admin, "/debug/caches").await.json();
    v["caches"].as_array().unwrap().iter().find(|c| c["resource"] == resource).cloned().unwrap()
}

/// Reads `n` JSON events (bookmarks skipped).
async fn events(w: &mut Watch, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let e = w
            .next_within(Duration::from_secs(20))
            .await
            .unwrap_or_else(|| panic!("stalled after {out:?}"));
        if e["type"] != "BOOKMARK" {
            let name = e["object"]["metadata"]["name"].as_str().unwrap_or("").to_string();
            out.push((e["type"].as_str().unwrap_or("").to_string(), name));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_an_outage_serves_the_disk_state_then_converges() {
    let work = TempDir::new("disk-work");
    let states = TempDir::new("disk-states");
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let team0 = get(&sim.addr().to_string(), "/api/v1/namespaces/team-0/pods").await.json();
    let names: Vec<String> =
        items_of(&team0).keys().map(|k| k.trim_start_matches("team-0/").to_string()).collect();
    let (pod, victim) = (names[0].clone(), names[1].clone());
    let reads = [
        "/api/v1/pods?resourceVersion=0".to_string(),
        "/api/v1/namespaces/team-0/pods?resourceVersion=0&labelSelector=tier%3Dfrontend"
            .to_string(),
        format!("/api/v1/namespaces/team-0/pods/{pod}?resourceVersion=0"),
        "/api/v1/configmaps?resourceVersion=0".to_string(),
    ];

    // --- First life: caches synced, answers recorded, states written.
    let first = kubeplex(&sim, &work.0, &states.0).await;
    let addr = first.addr.to_string();
    let mut before = Vec::new();
    for path in &reads {
        let r = get(&addr, path).await;
        assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        before.push(r.body);
    }
    let written = eventually(Duration::from_secs(10), || {
        metric(&first, "kubeplex_disk_state_writes_total", &["result=\"ok\""]) >= 2
    })
    .await;
    assert!(written, "states not written:\n{}", metrics(&first));
    let files: BTreeSet<String> = std::fs::read_dir(&states.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        BTreeSet::from(["core_v1_configmaps_json.state".into(), "core_v1_pods_json.state".into()])
    );
    // What an operator graphs: the state files' bytes, as on disk.
    let on_disk: u64 =
        std::fs::read_dir(&states.0).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    let shown = eventually(Duration::from_secs(10), || {
        metric(&first, "kubeplex_disk_state_bytes", &[]) == on_disk
    })
    .await;
    assert!(
        shown,
        "kubeplex_disk_state_bytes is not the files' {on_disk} bytes:\n{}",
        metrics(&first)
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&states.0), 0o700);
        assert_eq!(mode(&states.0.join("core_v1_pods_json.state")), 0o600);
    }
    let rv_before = before[0].clone();
    let rv_before: Value = serde_json::from_slice(&rv_before).unwrap();
    let rv_before = rv_before["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    // --- The node reboots during an apiserver outage.
    assert!(first.shutdown(Duration::from_secs(5)).await);
    sim.stop_serving();
    let second = kubeplex(&sim, &work.0, &states.0).await;
    let addr = second.addr.to_string();
    // The last state, byte for byte, from disk.
    for (path, want) in reads.iter().zip(&before) {
        let r = get(&addr, path).await;
        assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(&r.body, want, "{path}: not the state before the restart");
    }
    let pods = debug_cache(&second, "pods/v1").await;
    assert_eq!(pods["state_from"], "disk", "{pods}");
    assert!(pods["disk_state_age_seconds"].as_u64().is_some(), "{pods}");
    assert_eq!(metric(&second, "kubeplex_disk_state_loads_total", &["result=\"served\""]), 2);
    // A consistent list needs the apiserver: not answered from the disk state.
    let consistent = get(&addr, "/api/v1/pods").await;
    assert_eq!(consistent.status, 503, "{}", String::from_utf8_lossy(&consistent.body));
    // A watch resuming from the disk state's RV.
    let path = format!("/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={rv_before}");
    let mut open = watch(&addr, &path, JSON).await;
    assert_eq!(open.status, 200);

    // --- Meanwhile the cluster changed (through another apiserver).
    sim.create(small_pod("team-0", "added-while-down", "Running", "node-0")).unwrap();
    sim.delete("", "pods", "team-0", &victim).unwrap();
    sim.modify("", "pods", "team-0", &pod, |p| {
        p["metadata"]["labels"]["restarted"] = Value::from("yes");
    })
    .unwrap();

    // --- The apiserver is back: the cache converges and the watch sees the differences.
    sim.restart().await.unwrap();
    let mut seen = events(&mut open, 3).await;
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("ADDED".to_string(), "added-while-down".to_string()),
            ("DELETED".to_string(), victim.clone()),
            ("MODIFIED".to_string(), pod.clone()),
        ]
    );
    let direct = get(&sim.addr().to_string(), "/api/v1/pods").await.json();
    let cached = get(&addr, "/api/v1/pods?resourceVersion=0").await.json();
    assert_eq!(items_of(&cached), items_of(&direct), "converged to the apiserver's state");
    assert_eq!(debug_cache(&second, "pods/v1").await["state_from"], "upstream");
    second.shutdown(Duration::from_secs(5)).await;
}

/// A cache rendered from the other encoding's (`live::mirror`) has its state written too, and a
/// restart during an outage serves both encodings from their states, as caches of their own
/// list+watch would be: neither waits for the other's first load, which the outage delays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_encodings_are_served_from_their_disk_states_after_a_restart_during_an_outage() {
    const PB: &str = "application/vnd.kubernetes.protobuf";
    let work = TempDir::new("disk-work");
    let states = TempDir::new("disk-states");
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let preload = ["pods", "pods:protobuf"];
    let first = kubeplex_with(&sim, &work.0, &states.0, &preload).await;
    let path = "/api/v1/pods?resourceVersion=0";
    let mut before = Vec::new();
    for accept in [JSON, PB] {
        let r = get_accept(&first.addr.to_string(), path, accept).await;
        assert_eq!(r.status, 200);
        before.push(r.body);
    }
    let written = eventually(Duration::from_secs(10), || {
        std::fs::metadata(states.0.join("core_v1_pods_protobuf.state")).is_ok()
            && std::fs::metadata(states.0.join("core_v1_pods_json.state")).is_ok()
    })
    .await;
    assert!(written, "states not written:\n{}", metrics(&first));
    assert!(first.shutdown(Duration::from_secs(5)).await);
    sim.stop_serving();
    let second = kubeplex_with(&sim, &work.0, &states.0, &preload).await;
    for (accept, want) in [JSON, PB].into_iter().zip(&before) {
        let r = get_accept(&second.addr.to_string(), path, accept).await;
        assert_eq!(r.status, 200, "{accept}: {}", String::from_utf8_lossy(&r.body));
        assert!(r.body == *want, "{accept}: not the state before the restart");
    }
    assert_eq!(metric(&second, "kubeplex_disk_state_loads_total", &["result=\"served\""]), 2);
    second.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_state_file_is_skipped_and_the_upstream_serves() {
    let work = TempDir::new("disk-corrupt-work");
    let states = TempDir::new("disk-corrupt-states");
    std::fs::write(states.0.join("core_v1_pods_json.state"), b"KPXSTATE\x01\0\0\0garbage").unwrap();
    std::fs::write(states.0.join("core_v1_configmaps_json.state"), [0u8; 3]).unwrap();
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let proxy = kubeplex(&sim, &work.0, &states.0).await;
    assert_eq!(metric(&proxy, "kubeplex_disk_state_loads_total", &["result=\"invalid\""]), 2);
    let addr = proxy.addr.to_string();
    let r = get(&addr, "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(r.status, 200);
    let direct = get(&sim.addr().to_string(), "/api/v1/pods").await.json();
    assert_eq!(items_of(&r.json()), items_of(&direct));
    // The bad files are replaced by good ones at the next write.
    let replaced = eventually(Duration::from_secs(10), || {
        metric(&proxy, "kubeplex_disk_state_writes_total", &["result=\"ok\""]) >= 2
    })
    .await;
    assert!(replaced);
    proxy.shutdown(Duration::from_secs(5)).await;
}

/// The upstream answers, but refuses kubeplex (its RBAC was taken away): a refusal is an
/// answer, so the disk state is never served; clients get the apiserver's own 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_an_answer_and_the_disk_state_is_not_served() {
    let work = TempDir::new("disk-refused-work");
    let states = TempDir::new("disk-refused-states");
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let first = kubeplex(&sim, &work.0, &states.0).await;
    let written = eventually(Duration::from_secs(10), || {
        metric(&first, "kubeplex_disk_state_writes_total", &["result=\"ok\""]) >= 2
    })
    .await;
    assert!(written);
    first.shutdown(Duration::from_secs(5)).await;

    // kubeplex's credentials (none: anonymous) may read nothing any more.
    sim.set_auth(Some(kubeplex_sim::auth::Auth::new()));
    let second = kubeplex(&sim, &work.0, &states.0).await;
    let addr = second.addr.to_string();
    let direct = get(&sim.addr().to_string(), "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(direct.status, 403);
    let through = get(&addr, "/api/v1/pods?resourceVersion=0").await;
    assert_eq!(through.status, 403, "{}", String::from_utf8_lossy(&through.body));
    assert_eq!(through.body, direct.body, "the apiserver's refusal, not the disk state");
    assert_eq!(metric(&second, "kubeplex_disk_state_loads_total", &["result=\"served\""]), 0);
    second.shutdown(Duration::from_secs(5)).await;
}

/// A restart with the apiserver up (a DaemonSet rollout): kubeplex's watchers get a last
/// BOOKMARK at the RV of the state it writes as it stops; the next kubeplex resumes from that
/// state — a watch from its RV upstream, no list — and the watchers resume from the bookmark's
/// RV: the change made while no kubeplex ran reaches them, nothing is listed again, nothing is
/// lost or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_from_the_state_on_disk_and_its_watchers_from_the_last_bookmark() {
    let work = TempDir::new("resume-work");
    let states = TempDir::new("resume-states");
    let sim = SimBuilder::new().seed(seed::cluster(shape())).start().await.unwrap();
    let first = kubeplex(&sim, &work.0, &states.0).await;
    // Its caches loaded: a watch arriving before (a slow first load, on a busy machine) would
    // be passed through to the apiserver, which has no last bookmark to give.
    support::stack::wait_ready(&first).await;
    let path = "/api/v1/namespaces/team-0/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true";
    let mut w = watch(&first.addr.to_string(), path, JSON).await;
    assert_eq!(w.status, 200);
    let watched = eventually(Duration::from_secs(10), || {
        first
            .state
            .caches
            .status()
            .iter()
            .any(|c| c.resource.starts_with("pods") && c.watchers == 1)
    })
    .await;
    assert!(watched, "the watch is the pods cache's");
    sim.create(small_pod("team-0", "before-restart", "Running", "node-0")).unwrap();
    let mut seen = Vec::new();
    while !seen.iter().any(|(_, name, _)| name == "before-restart") {
        let e = w.next_within(Duration::from_secs(10)).await.expect("the new pod's event");
        seen.push(ev(&e));
    }
    // A change outside the watch's scope: the cache moves past the watcher's last event.
    let elsewhere = sim.create(small_pod("team-1", "elsewhere", "Running", "node-1")).unwrap();
    let elsewhere: u64 =
        elsewhere["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let moved = eventually(Duration::from_secs(10), || {
        first
            .state
            .caches
            .status()
            .iter()
            .any(|c| c.resource.starts_with("pods") && c.resource_version >= elsewhere)
    })
    .await;
    assert!(moved, "the cache never saw the change elsewhere");

    // --- Stopped: the watch's last frame is a BOOKMARK at the state's RV, then it ends.
    assert!(first.shutdown(Duration::from_secs(5)).await);
    let mut last = None;
    while let Some(e) = w.next_within(Duration::from_secs(5)).await {
        last = Some(ev(&e));
    }
    assert!(w.ends_within(Duration::from_secs(1)).await && !w.broken(), "ended cleanly");
    let (kind, _, rv) = last.expect("a last frame");
    assert_eq!(kind, "BOOKMARK", "the last frame before the stop");
    let rv: u64 = rv.parse().unwrap();
    let newest = seen.iter().filter_map(|(_, _, rv)| rv.parse::<u64>().ok()).max().unwrap();
    assert!(rv > newest && rv >= elsewhere, "bookmark {rv}: events to {newest}, cache {elsewhere}");

    // --- While no kubeplex runs, the cluster changes.
    sim.create(small_pod("team-0", "during-restart", "Running", "node-0")).unwrap();

    // --- The next kubeplex resumes from disk; the watcher from the bookmark.
    let second = kubeplex(&sim, &work.0, &states.0).await;
    let resumed = format!(
        "/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
    );
    let mut w = watch(&second.addr.to_string(), &resumed, JSON).await;
    assert_eq!(w.status, 200);
    sim.create(small_pod("team-0", "after-restart", "Running", "node-0")).unwrap();
    let mut after = Vec::new();
    while after.len() < 2 {
        let e = w.next_within(Duration::from_secs(10)).await.expect("events after the restart");
        let (kind, name, erv) = ev(&e);
        assert_ne!(kind, "ERROR", "{e}");
        if kind != "BOOKMARK" {
            assert!(erv.parse::<u64>().unwrap() > rv, "{e}: not after the bookmark");
            after.push((kind, name));
        }
    }
    assert_eq!(
        after,
        [
            ("ADDED".to_string(), "during-restart".to_string()),
            ("ADDED".to_string(), "after-restart".to_string())
        ]
    );
    // No list, no streaming list: each cache watched the apiserver from its state's RV.
    let calls = |verb: &str| {
        metric(&second, "kubeplex_upstream_calls_total", &[&format!("verb=\"{verb}\"")])
    };
    assert_eq!((calls("list"), calls("watchlist")), (0, 0), "{}", metrics(&second));
    assert!(calls("watch") >= 2, "{}", metrics(&second));
    // Its state is the apiserver's.
    let direct = get(&sim.addr().to_string(), "/api/v1/pods").await.json();
    let cached = get(&second.addr.to_string(), "/api/v1/pods?resourceVersion=0").await.json();
    assert_eq!(items_of(&cached), items_of(&direct));
    assert_eq!(debug_cache(&second, "pods/v1").await["state_from"], "upstream");
    second.shutdown(Duration::from_secs(5)).await;
}
