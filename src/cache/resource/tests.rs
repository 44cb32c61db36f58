//! Where a watch starts in a cache whose state a proof has shown.

use super::*;
use crate::cache::fanout::{Closed, Filter, Next};
use crate::cache::history::TooOld;
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

/// How current a cache's view is, for a grant derived from it (`ResourceCache::view`): live
/// from the moment a watch of the apiserver is answered, with no gap since — not during a load,
/// not once a watch failed, not while its state is one read back from disk, not through a
/// tier above kubeplex; and a watch resumed after its routine end keeps the view's start.
#[test]
fn a_view_is_live_only_while_the_apiservers_watch_runs_without_a_gap() {
    let within = Duration::from_secs(60);
    let fresh = || {
        let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
        ResourceCache::new(
            configmaps_info(),
            Encoding::Json,
            StoreLimits::default(),
            WatchConfig::default(),
            metrics,
        )
    };
    let cache = configmaps();
    assert_eq!(cache.view(within), View::Gap, "loaded, not yet watched");
    cache.watching(false);
    let View::Live(since) = cache.view(within) else { panic!("live once watched") };
    cache.watching(false);
    assert_eq!(cache.view(within), View::Live(since), "a watch resumed: the same view");
    cache.watch_lost();
    assert_eq!(cache.view(within), View::Gap, "a failed watch is a gap");
    std::thread::sleep(Duration::from_millis(2));
    cache.watching(false);
    assert!(matches!(cache.view(within), View::Live(s) if s > since), "live again, anew");
    cache.load_started(std::time::Instant::now(), true);
    assert_eq!(cache.view(within), View::Gap, "a load replaces what the cache knew");
    cache.replace(vec![(*cm("ns", "a", 12, &[])).clone()], 12);
    assert_eq!(cache.view(within), View::Gap, "loaded again, not yet watched");
    cache.watching(true);
    assert_eq!(cache.view(within), View::ViaTier, "watched through a pool: only it can tell");
    let from_disk = fresh();
    assert!(from_disk.restore(vec![(*cm("ns", "a", 5, &[])).clone()], 5, 1_700_000_000));
    from_disk.watching(false);
    assert_eq!(from_disk.view(within), View::Gap, "a state from disk grants nothing");
}

/// A relist's events take a watcher from the cache's previous state to the list's
/// (`cache::relist`): right for a watcher that held that state, not for one that started ahead
/// of the cache, inside the gap — it may hold an object created and deleted there, or one a
/// DELETED placed at an RV of the gap before its true deletion. Such watches are ended, and
/// none starts or resumes inside the gap (410: the client lists again); one from the cache's
/// previous RV gets every change, one at the list's RV none.
#[test]
fn no_watch_starts_inside_a_relists_gap() {
    let cache = configmaps();
    cache.replace(
        [("a", 5), ("b", 6), ("c", 7)]
            .iter()
            .map(|(n, rv)| (*cm("ns", n, *rv, &[])).clone())
            .collect(),
        10,
    );
    let before = cache.register_watch(WatchFrom::After(10), Filter::default(), false).unwrap();
    // Clients ahead of the cache, at 18 and at 14.
    let ahead = cache.register_watch(WatchFrom::After(18), Filter::default(), false).unwrap();
    let behind = cache.register_watch(WatchFrom::After(14), Filter::default(), false).unwrap();
    // The relist at 20 finds b and c gone and a changed at 20: b at 18, c at 19.
    cache.replace(vec![(*cm("ns", "a", 20, &[])).clone()], 20);
    assert_eq!(queued(&before), [18, 19, 20]);
    for reg in [&ahead, &behind] {
        assert!(matches!(
            reg.queue.take(usize::MAX, futures_util::task::noop_waker_ref()),
            Next::Closed(Closed::Reset)
        ));
    }
    for rv in [11, 14, 18, 19] {
        let resumed = cache.register_watch(WatchFrom::After(rv), Filter::default(), false);
        assert_eq!(resumed.err(), Some(TooOld { oldest: 20 }), "from {rv}");
    }
    let from_before = cache.register_watch(WatchFrom::After(10), Filter::default(), false);
    assert_eq!(queued(&from_before.unwrap()), [18, 19, 20]);
    let at_list = cache.register_watch(WatchFrom::After(20), Filter::default(), false).unwrap();
    assert_eq!(queued(&at_list), Vec::<u64>::new());
}
