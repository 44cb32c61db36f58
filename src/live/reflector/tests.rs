//! The reflector on its own, against the fake apiserver over loopback: what it yields, with no
//! cache behind it (the sink records the events).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::cache::resource::EventKind;
use crate::cache::testutil::configmaps_info as configmaps;
use crate::live::metrics::UpstreamMetrics;
use crate::upstream::UpstreamConfig;
use kubeplex_sim::{Sim, SimBuilder};

/// What a test reads of a feed event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// `consistent`: the load asked for the upstream's current state.
    LoadStarted {
        consistent: bool,
    },
    LoadFailed,
    Loaded {
        names: Vec<String>,
        rv: u64,
        whole: bool,
    },
    Event(EventKind, String, u64),
    Bookmark,
    Skipped,
    Watching,
    WatchLost,
    NotServed,
}

fn seen(feed: &Feed) -> Seen {
    match feed {
        Feed::LoadStarted { consistent, .. } => Seen::LoadStarted { consistent: *consistent },
        Feed::LoadFailed { .. } => Seen::LoadFailed,
        Feed::Loaded { objects, rv, whole } => Seen::Loaded {
            names: objects.iter().map(|o| o.key.to_string()).collect(),
            rv: *rv,
            whole: *whole,
        },
        Feed::Event(kind, o) => Seen::Event(*kind, o.key.to_string(), o.resource_version),
        Feed::Bookmark(_) => Seen::Bookmark,
        Feed::Skipped => Seen::Skipped,
        Feed::Watching { .. } => Seen::Watching,
        Feed::WatchLost => Seen::WatchLost,
        Feed::NotServed => Seen::NotServed,
    }
}

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "feed"}, "data": {"k": name}})
}

struct Running {
    sim: Sim,
    events: Arc<Mutex<Vec<Seen>>>,
    metrics: UpstreamMetrics,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    async fn start(encoding: Encoding) -> Running {
        Running::start_with(encoding, FirstLoad::Stream).await
    }

    async fn start_with(encoding: Encoding, first: FirstLoad) -> Running {
        let sim =
            SimBuilder::new().seed([configmap("a"), configmap("b")]).start().await.expect("sim");
        let dir = crate::upstream::testing::TempDir::new("reflector");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let upstream = Upstream::new(UpstreamConfig::resolve(Some(&kubeconfig), None).unwrap())
            .expect("client");
        let metrics = UpstreamMetrics::new(&prometheus::Registry::new()).expect("metrics");
        let calls = metrics.for_cache("configmaps/v1", encoding.as_str());
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let reflector =
            Reflector::new(Arc::new(upstream), configmaps(), encoding, calls, move |f: Feed| {
                sink.lock().unwrap().push(seen(&f))
            })
            .first_load(first);
        let task = tokio::spawn(reflector.run());
        Running { sim, events, metrics, task }
    }

    /// Waits (at most 10 s) until the feed holds `n` events, and returns them.
    async fn until(&self, n: usize) -> Vec<Seen> {
        for _ in 0..1000 {
            let events = self.events.lock().unwrap().clone();
            if events.len() >= n {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("feed stopped at {:?}", self.events.lock().unwrap());
    }

    fn calls(&self, verb: &str) -> u64 {
        self.metrics.calls.with_label_values(&["configmaps/v1", "json", verb]).get()
    }
}

#[tokio::test]
async fn a_streaming_list_yields_the_state_then_changes() {
    for encoding in [Encoding::Json, Encoding::Protobuf] {
        let r = Running::start(encoding).await;
        let events = r.until(2).await;
        let listed_rv = r.sim.current_rv();
        assert_eq!(events[0], Seen::LoadStarted { consistent: true }, "{encoding:?}");
        assert_eq!(
            events[1],
            Seen::Loaded {
                names: vec!["feed/a".into(), "feed/b".into()],
                rv: listed_rv,
                whole: true
            },
            "{encoding:?}: the state, in key order, at the upstream's RV"
        );

        let events = r.until(3).await;
        assert_eq!(events[2], Seen::Watching, "{encoding:?}: the stream goes on as a watch");

        let changed = r.sim.modify("", "configmaps", "feed", "a", |v| v["data"]["k"] = json!("x"));
        let rv: u64 =
            changed.unwrap()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        r.sim.delete("", "configmaps", "feed", "b").unwrap();
        let events = r.until(5).await;
        let changes: Vec<_> = events[3..].iter().filter(|e| **e != Seen::Bookmark).collect();
        assert_eq!(
            changes,
            [
                &Seen::Event(EventKind::Modified, "feed/a".into(), rv),
                &Seen::Event(EventKind::Deleted, "feed/b".into(), rv + 1)
            ],
            "{encoding:?}"
        );
    }
}

#[tokio::test]
async fn expired_history_relists_and_yields_a_new_state() {
    let r = Running::start(Encoding::Json).await;
    r.until(2).await;
    // The watch ends, and its resumption is held until a change and a compaction have taken
    // the history past the RV it resumes from: the upstream answers it 410.
    r.sim.stall(true);
    r.sim.drop_watches();
    r.sim.create(configmap("c")).unwrap();
    r.sim.compact();
    r.sim.stall(false);
    let relisted = loop {
        let events = r.until(3).await;
        if let Some(i) = events.iter().skip(2).position(|e| matches!(e, Seen::Loaded { .. })) {
            break events[2..=i + 2].to_vec();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let last = relisted.last().cloned();
    // A state not older than the watch's RV is all the cache needs to go on: what an upstream
    // (a pool tier's cache, the apiserver's watch cache) answers without a proof.
    assert!(
        relisted.contains(&Seen::LoadStarted { consistent: false }),
        "a second load, not older than the watch's RV: {relisted:?}"
    );
    match last {
        Some(Seen::Loaded { names, whole: true, .. }) => {
            assert_eq!(names, ["feed/a", "feed/b", "feed/c"]);
        }
        other => panic!("expected the relisted state, got {other:?}"),
    }
    assert!(r.metrics.relists.with_label_values(&["configmaps/v1", "json"]).get() >= 1);
    assert_eq!(r.calls("watchlist"), 2, "both loads were streaming lists");
}

/// A cache started by a list that accepts any state (an informer's first list at
/// resourceVersion=0) loads as that list would: a paged list at resourceVersion=0, which claims
/// no consistency (the cache's consistent reads are proven as for any cache).
#[tokio::test]
async fn a_cache_started_by_a_read_of_any_state_lists_at_resource_version_0() {
    let r = Running::start_with(Encoding::Json, FirstLoad::PagedAnyState).await;
    let events = r.until(2).await;
    assert_eq!(events[0], Seen::LoadStarted { consistent: false });
    assert!(matches!(&events[1], Seen::Loaded { names, whole: true, .. } if names.len() == 2));
    assert_eq!((r.calls("list"), r.calls("watchlist")), (1, 0), "one paged list");
}

/// A watch the upstream refuses — its watch cache (re)initializing, 429 — is a gap in the
/// cache's view until a watch is answered again: the cache is told both, and the watch resumes
/// from its RV (no load).
#[tokio::test]
async fn a_refused_watch_is_a_gap_until_one_is_answered_again() {
    let r = Running::start(Encoding::Json).await;
    assert_eq!(r.until(3).await[2], Seen::Watching);
    r.sim.reinitializing("", "configmaps", true);
    let lost = loop {
        let events = r.until(4).await;
        if let Some(i) = events.iter().position(|e| *e == Seen::WatchLost) {
            break i;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    r.sim.reinitializing("", "configmaps", false);
    let back = loop {
        let events = r.until(lost + 2).await;
        if let Some(i) = events.iter().skip(lost).position(|e| *e == Seen::Watching) {
            break events[lost..=lost + i].to_vec();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        back.iter().all(|e| matches!(e, Seen::WatchLost | Seen::Watching | Seen::Bookmark)),
        "resumed by RV, with no load in between: {back:?}"
    );
    assert_eq!(r.calls("watchlist"), 1, "one load only");
}
