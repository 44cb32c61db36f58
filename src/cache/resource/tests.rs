//! Where a watch starts in a cache whose state a proof has shown.

use super::*;
use crate::cache::fanout::{Filter, Next};
use crate::cache::testutil::{cm, configmaps_info};

fn configmaps() -> ResourceCache {
    let info = configmaps_info();
    let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
    let cache = ResourceCache::new(
        info,
        Encoding::Json,
        StoreLimits::default(),
        WatchConfig::default(),
        metrics,
    );
    cache.replace(vec![(*cm("ns", "a", 5, &[])).clone()], 10);
    cache
}

/// The RVs of the events queued for a watch.
fn queued(reg: &Registration) -> Vec<u64> {
    match reg.queue.take(usize::MAX, futures_util::task::noop_waker_ref()) {
        Next::Frames(frames) => frames.iter().map(|q| q.rv).collect(),
        _ => Vec::new(),
    }
}

/// A watch started at the upstream's RV 20 while the cache, still at 10, holds the state the
/// upstream had at 20: the state, then only the changes after 20 — the events between, which
/// change nothing that state shows (an object created and deleted), are not sent, as the
/// apiserver's watch from 20 would not send them. The cache's other watchers get them.
#[test]
fn a_watch_of_a_state_shown_ahead_of_the_cache_starts_at_the_upstreams_rv() {
    let cache = configmaps();
    let ahead = WatchFrom::StateAhead { rv: 20, cache_at: 10 };
    let reg = cache.register_watch(ahead, Filter::default(), false).unwrap();
    let other = cache.register_watch(WatchFrom::Now, Filter::default(), false).unwrap();
    assert_eq!(reg.position, 20);
    assert_eq!(reg.initial.as_ref().map(|s| s.len()), Some(1));
    cache.apply(EventKind::Added, (*cm("ns", "b", 15, &[])).clone());
    cache.apply(EventKind::Deleted, (*cm("ns", "b", 16, &[])).clone());
    cache.apply(EventKind::Modified, (*cm("ns", "a", 25, &[])).clone());
    assert_eq!(queued(&reg), [25]);
    assert_eq!(queued(&other), [15, 16, 25]);
}

/// Once the cache has moved since the proof looked at it, its state is no longer the one shown:
/// the watch starts from the current state and RV, as any.
#[test]
fn a_state_shown_ahead_of_a_cache_that_moved_since_is_not_used() {
    let cache = configmaps();
    cache.apply(EventKind::Added, (*cm("ns", "b", 15, &[])).clone());
    let ahead = WatchFrom::StateAhead { rv: 20, cache_at: 10 };
    let reg = cache.register_watch(ahead, Filter::default(), false).unwrap();
    assert_eq!(reg.position, 15);
    assert_eq!(reg.initial.as_ref().map(|s| s.len()), Some(2));
}
