//! The short soak (issue 47): kubeplex in front of the fake apiserver through rounds of the load
//! and disruptions a production proxy lives through — informers listing and watching with
//! churn all along, cold clients' bursts of lists, the apiserver's watches dropped, its history
//! compacted (kubeplex's watch resumes past it and relists), an outage with a restart,
//! throttling. After each round, once its clients have gone, every count that must come back
//! comes back to where it was before the first round: downstream watchers, client connections,
//! passthrough requests in flight, the runtime's tasks, discovery's entries; every informer's
//! view was the apiserver's, with no event lost or out of order. A leak that grows by a round
//! fails it. It asserts counts, never timings (the long soak against the real apiserver:
//! `scripts/realcluster/`, issue 47).

use kubeplex_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use kubeplex::cache::fanout::WatchConfig;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use support::stack::Stack;
use support::watchers::{seed_churn_pods, settle, spawn_churn, Informer, CHURN_NAMESPACES};
use support::*;

/// Rounds after the warm-up: each disruption twice.
const ROUNDS: usize = 8;
/// Churn in each round (a write every 20 ms).
const ROUND: Duration = Duration::from_secs(3);
/// Tasks the second pass through the schedule may keep beyond the first pass at its lowest:
/// timers come and go. What a round leaves varies by more — the upstream connection pool (a task
/// at each end of each idle connection, until its idle timeout) grows to the concurrency each
/// burst of passed-through lists happened to reach (20 to 52 tasks after rounds of one run) —
/// so each pass is judged by its floor, the round that left the fewest (the outage's, which
/// closes the upstream connections). A leak of one task per request, watch or reconnection is
/// dozens a round, and raises every round after it, the floor included.
const TASK_SLACK: u64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disruption {
    /// The apiserver ends every watch.
    DropWatches,
    /// Its history compacted, then every watch ended: resumes past it get 410.
    CompactAndDrop,
    /// It stops serving for a second and comes back with its state.
    Outage,
    /// It answers the next requests 429.
    Throttle,
}

const SCHEDULE: [Disruption; 4] =
    [Disruption::DropWatches, Disruption::CompactAndDrop, Disruption::Outage, Disruption::Throttle];

/// What must come back once a round's clients are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    watchers: u64,
    connections: u64,
    inflight: u64,
    tasks: u64,
    /// The process's open descriptors (`process_open_fds`): judged across passes, as the tasks.
    fds: u64,
    discovery_entries: u64,
    /// The caches' watches at the apiserver (`kubeplex_upstream_watches`): each back after the
    /// disruption, none more.
    upstream_watches: u64,
}

async fn counts(stack: &Stack) -> Counts {
    Counts {
        watchers: stack.metric_sum("kubeplex_watchers", &[]).await,
        connections: stack.metric("kubeplex_client_connections").await,
        inflight: stack.metric_sum("kubeplex_passthrough_inflight_requests", &[]).await,
        tasks: stack.metric("kubeplex_runtime_alive_tasks").await,
        fds: stack.metric("process_open_fds").await,
        discovery_entries: stack.metric("kubeplex_discovery_entries").await,
        upstream_watches: stack.metric_sum("kubeplex_upstream_watches", &[]).await,
    }
}

/// Whether `now` is back at `base`: the same watchers, connections and entries, nothing in
/// flight. (The tasks are judged across rounds: see [`TASK_SLACK`].)
fn back(now: &Counts, base: &Counts) -> bool {
    now.watchers == base.watchers
        && now.connections == base.connections
        && now.inflight == 0
        && now.discovery_entries == base.discovery_entries
        && now.upstream_watches == base.upstream_watches
}

async fn disrupt(stack: &Stack, d: Disruption) {
    match d {
        Disruption::DropWatches => stack.sim.drop_watches(),
        Disruption::CompactAndDrop => {
            stack.sim.compact();
            stack.sim.drop_watches();
        }
        Disruption::Outage => {
            stack.sim.stop_serving();
            tokio::time::sleep(Duration::from_secs(1)).await;
            stack.sim.restart().await.expect("the apiserver back");
        }
        // Before the burst of cold lists (`round`), whose first requests meet it.
        Disruption::Throttle => stack.sim.throttle(5, 1),
    }
}

/// One round: informers through kubeplex with churn, a burst of cold lists (cached, paged and
/// passed through), the disruption halfway; then the informers must hold the apiserver's state
/// and stop.
async fn round(stack: &Arc<Stack>, n: usize, d: Option<Disruption>) {
    let addr = stack.addr();
    let informers: Vec<Arc<Informer>> = vec![
        Arc::new(Informer::new(
            &addr,
            &format!("/api/v1/namespaces/{}/pods", CHURN_NAMESPACES[0]),
            "",
        )),
        Arc::new(Informer::new(
            &addr,
            &format!("/api/v1/namespaces/{}/pods", CHURN_NAMESPACES[1]),
            "labelSelector=phase%3Da",
        )),
        Arc::new(Informer::new(&addr, "/api/v1/pods", "")),
    ];
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running: Vec<_> = informers
        .iter()
        .map(|i| {
            let (i, stopped) = (i.clone(), stopped.clone());
            tokio::spawn(async move { i.run(stopped).await })
        })
        .collect();
    let churn = spawn_churn(stack.clone(), ROUND, Duration::from_millis(20));
    if d == Some(Disruption::Throttle) {
        disrupt(stack, Disruption::Throttle).await;
    }
    // Cold clients listing everything at once: from the cache, paged, and passed through.
    let burst: Vec<_> = (0..24)
        .map(|k| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let path = match k % 3 {
                    0 => "/api/v1/pods?resourceVersion=0".to_string(),
                    1 => "/api/v1/pods?limit=10".to_string(),
                    _ => "/api/v1/configmaps".to_string(),
                };
                get(&addr, &path).await.status
            })
        })
        .collect();
    for b in burst {
        let status = b.await.expect("a list");
        assert!(status == 200 || status == 429, "round {n}: a cold list answered {status}");
    }
    // What the burst left of the throttling is used up here, not by the checks below.
    for _ in 0..5 {
        if get(&stack.upstream(), "/api/v1/namespaces").await.status != 429 {
            break;
        }
    }
    tokio::time::sleep(ROUND / 2).await;
    if let Some(d) = d.filter(|d| *d != Disruption::Throttle) {
        disrupt(stack, d).await;
    }
    churn.await.expect("churn");
    let settled = settle(stack, &informers, Duration::from_secs(20)).await;
    assert!(
        settled.converged && settled.problems.is_empty(),
        "round {n} ({d:?}): {:?}\n{}",
        settled.problems,
        settled.report.join("\n")
    );
    stop.send_replace(true);
    for r in running {
        r.await.expect("informer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_return_to_their_baseline_after_every_round_of_load_and_disruption() {
    let shape = ClusterShape { nodes: 3, namespaces: 2, pods: 20, configmaps: 4, services: 2 };
    let stack = Arc::new(
        Stack::build_with(
            SimBuilder::new(),
            shape,
            &["pods"],
            Duration::from_secs(600),
            WatchConfig::default(),
        )
        .await,
    );
    seed_churn_pods(&stack.sim);
    // The warm-up starts what a first round starts for good (caches, discovery entries, the
    // upstream's connections); the baseline is taken once it has settled.
    round(&stack, 0, None).await;
    let mut base = counts(&stack).await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = counts(&stack).await;
        if now == base {
            break;
        }
        base = now;
    }
    let mut after = Vec::new();
    for n in 1..=ROUNDS {
        let d = SCHEDULE[(n - 1) % SCHEDULE.len()];
        round(&stack, n, Some(d)).await;
        let mut now = counts(&stack).await;
        for _ in 0..150 {
            if back(&now, &base) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            now = counts(&stack).await;
        }
        assert!(back(&now, &base), "after round {n} ({d:?}): {now:?}, before the first: {base:?}");
        after.push((now.tasks, now.fds));
    }
    eprintln!("(tasks, open fds): {:?} before; after each round {after:?}", (base.tasks, base.fds));
    assert!(base.fds > 0, "process_open_fds: {base:?}");
    assert!(base.upstream_watches >= 1, "the pods cache's watch at the apiserver: {base:?}");
    let (first, second) = after.split_at(SCHEDULE.len());
    let floor = |pass: &[(u64, u64)], f: fn(&(u64, u64)) -> u64| pass.iter().map(f).min();
    assert!(
        floor(second, |c| c.0) <= floor(first, |c| c.0).map(|m| m + TASK_SLACK),
        "the runtime's tasks grow from one pass through the schedule to the next: {after:?}"
    );
    // Each connection is a descriptor (and a task at each end): the same slack.
    assert!(
        floor(second, |c| c.1) <= floor(first, |c| c.1).map(|m| m + TASK_SLACK),
        "open descriptors grow from one pass through the schedule to the next: {after:?}"
    );
    // The caches hold what the apiserver holds.
    let pods = get(&stack.addr(), "/api/v1/pods?resourceVersion=0").await.json();
    assert_eq!(pods["items"].as_array().map(Vec::len), Some(stack.sim.count("", "pods")));
}
