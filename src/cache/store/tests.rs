use std::time::{Duration, Instant};

use super::super::testutil::{cm, keys};
use super::*;

fn none() -> Vec<Arc<CachedObject>> {
    Vec::new()
}

fn limits(max_snapshots: usize, secs: u64) -> StoreLimits {
    StoreLimits { max_snapshots, max_snapshot_age: Duration::from_secs(secs) }
}

fn summary(changes: &[Applied]) -> Vec<(&'static str, String, u64)> {
    changes
        .iter()
        .map(|a| &a.change)
        .map(|c| (c.event_type(), c.object().key.to_string(), c.object().resource_version))
        .collect()
}

#[test]
fn relist_reports_added_modified_deleted_in_key_order() {
    let t0 = Instant::now();
    let mut store = Store::default();
    assert!(!store.synced());
    let first = store.replace([cm("b", "x", 10, &[]), cm("a", "x", 11, &[])], 20, t0);
    assert_eq!(summary(&first), [("ADDED", "a/x".into(), 11), ("ADDED", "b/x".into(), 10)]);
    assert!(store.synced());

    let same = store.replace([cm("a", "x", 11, &[]), cm("b", "x", 10, &[])], 21, t0);
    assert_eq!(same, []);
    assert_eq!(store.resource_version(), 21);

    let changes = store.replace(
        [
            cm("a", "x", 11, &[]),               // unchanged
            cm("b", "x", 30, &[("app", "web")]), // modified
            cm("a-b", "x", 31, &[]),             // added, sorts before "a/x"
        ],
        40,
        t0,
    );
    assert_eq!(summary(&changes), [("ADDED", "a-b/x".into(), 31), ("MODIFIED", "b/x".into(), 30)]);
    let changes = store.replace([cm("b", "x", 30, &[("app", "web")])], 50, t0);
    // Vanished objects come back with their last state.
    assert_eq!(summary(&changes), [("DELETED", "a-b/x".into(), 31), ("DELETED", "a/x".into(), 11)]);
    assert_eq!(store.len(), 1);
    assert_eq!(store.bytes(), store.get("b/x").unwrap().body.len());
}

#[test]
fn relist_sees_a_changed_body_with_the_same_rv() {
    let t0 = Instant::now();
    let mut store = Store::default();
    // Owned objects are taken as well as shared ones.
    store.replace(vec![(*cm("a", "x", 11, &[])).clone()], 20, t0);
    let changes = store.replace([cm("a", "x", 11, &[("l", "v")])], 21, t0);
    assert_eq!(summary(&changes), [("MODIFIED", "a/x".into(), 11)]);
}

#[test]
fn events_update_state_rv_and_bytes() {
    let t0 = Instant::now();
    let mut store = Store::default();
    store.replace([cm("ns", "a", 5, &[])], 10, t0);
    let a12 = cm("ns", "a", 12, &[("v", "2")]);
    let applied = store.apply(Change::Modified(Arc::clone(&a12)), t0).unwrap();
    assert_eq!(applied.change, Change::Modified(Arc::clone(&a12)));
    assert_eq!(applied.previous.map(|p| p.resource_version), Some(5));
    assert_eq!(store.apply(Change::Added(cm("ns", "b", 13, &[])), t0).unwrap().previous, None);
    assert_eq!(store.resource_version(), 13);
    assert_eq!(keys(store.current().items().values()), ["ns/a", "ns/b"]);
    let expected: usize = store.current().items().values().map(|o| o.body.len()).sum();
    assert_eq!(store.bytes(), expected);

    // The DELETED event carries the deletion's RV.
    let applied = store.apply(Change::Deleted(cm("ns", "a", 14, &[("v", "2")])), t0).unwrap();
    assert_eq!(applied.previous, Some(a12));
    assert_eq!(keys(store.current().items().values()), ["ns/b"]);
    assert_eq!(store.bytes(), store.get("ns/b").unwrap().body.len());

    // Deleting an absent key changes nothing but the RV.
    assert_eq!(store.apply(Change::Deleted(cm("ns", "zz", 15, &[])), t0).unwrap().previous, None);
    assert_eq!(store.resource_version(), 15);
    assert_eq!(store.at(14, t0).unwrap().items(), store.at(15, t0).unwrap().items());
}

#[test]
fn stale_events_are_refused() {
    let t0 = Instant::now();
    let mut store = Store::default();
    store.replace([cm("ns", "a", 5, &[])], 10, t0);
    let err = store.apply(Change::Added(cm("ns", "b", 10, &[])), t0).unwrap_err();
    assert_eq!(err, ApplyError::Stale { event: 10, current: 10 });
    assert_eq!(err.to_string(), "event at resource version 10 is not newer than the cache's 10");
    assert!(store.bookmark(20, t0));
    assert!(!store.bookmark(20, t0));
    assert!(!store.bookmark(15, t0));
    assert_eq!(store.resource_version(), 20);
    let err = store.apply(Change::Modified(cm("ns", "a", 19, &[])), t0).unwrap_err();
    assert_eq!(err, ApplyError::Stale { event: 19, current: 20 });
    assert_eq!(store.len(), 1);
    assert_eq!(store.get("ns/a").unwrap().resource_version, 5);
}

#[test]
fn at_serves_the_state_of_each_rv() {
    let t0 = Instant::now();
    let mut store = Store::new(limits(100, 60));
    store.replace([cm("ns", "a", 5, &[])], 10, t0);
    store.apply(Change::Added(cm("ns", "b", 12, &[])), t0).unwrap();
    store.apply(Change::Deleted(cm("ns", "a", 15, &[])), t0).unwrap();
    store.bookmark(20, t0);

    let at = |store: &Store, rv| {
        store.at(rv, Instant::now()).map(|s| (s.resource_version(), keys(s.items().values())))
    };
    assert_eq!(at(&store, 10), Ok((10, vec!["ns/a".into()])));
    assert_eq!(at(&store, 11), Ok((11, vec!["ns/a".into()])));
    assert_eq!(at(&store, 12), Ok((12, vec!["ns/a".into(), "ns/b".into()])));
    assert_eq!(at(&store, 14), Ok((14, vec!["ns/a".into(), "ns/b".into()])));
    assert_eq!(at(&store, 15), Ok((15, vec!["ns/b".into()])));
    assert_eq!(at(&store, 20), Ok((20, vec!["ns/b".into()])));
    assert_eq!(at(&store, 21), Err(SnapshotError::TooNew { current: 20 }));
    assert_eq!(at(&store, 9), Err(SnapshotError::TooOld { oldest: 10 }));
    assert_eq!(store.current().resource_version(), 20);
    assert_eq!(store.snapshot_count(), 3);
    assert_eq!(store.oldest_rv(), 10);

    // A relist starts the window afresh: what lay between is unknown.
    store.replace([cm("ns", "c", 30, &[])], 40, t0);
    assert_eq!(at(&store, 20), Err(SnapshotError::TooOld { oldest: 40 }));
    assert_eq!(at(&store, 40), Ok((40, vec!["ns/c".into()])));
    assert_eq!(store.snapshot_count(), 1);
    assert_eq!(
        SnapshotError::TooOld { oldest: 40 }.to_string(),
        "resource version is older than the oldest kept, 40"
    );
}

#[test]
fn window_is_bounded_by_count() {
    let t0 = Instant::now();
    let mut store = Store::new(limits(3, 600));
    store.replace(none(), 10, t0);
    for rv in 11..=15 {
        store.apply(Change::Added(cm("ns", &format!("o{rv}"), rv, &[])), t0).unwrap();
    }
    // States began at 10, 11, ..., 15; the three newest are kept.
    assert_eq!(store.snapshot_count(), 3);
    assert_eq!(store.oldest_rv(), 13);
    assert_eq!(store.at(12, t0), Err(SnapshotError::TooOld { oldest: 13 }));
    assert_eq!(store.at(13, t0).unwrap().len(), 3);
    assert_eq!(store.at(15, t0).unwrap().len(), 5);

    let mut single = Store::new(limits(0, 600));
    single.replace(none(), 10, t0);
    single.apply(Change::Added(cm("ns", "a", 11, &[])), t0).unwrap();
    assert_eq!(single.snapshot_count(), 1);
    assert_eq!(single.at(10, t0), Err(SnapshotError::TooOld { oldest: 11 }));
}

#[test]
fn window_is_bounded_by_age_since_superseded() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut store = Store::new(limits(100, 60));
    store.replace(none(), 10, t0);
    // The list's state is superseded at t0+10s, the next at t0+50s.
    store.apply(Change::Added(cm("ns", "a", 11, &[])), t0 + s(10)).unwrap();
    store.apply(Change::Added(cm("ns", "b", 12, &[])), t0 + s(50)).unwrap();
    store.expire(t0 + s(70));
    assert_eq!(store.at(10, t0 + s(70)).map(|s| s.len()), Ok(0));
    // Reading past the age limit finds the state gone, before anything expires it.
    assert_eq!(store.at(10, t0 + s(71)), Err(SnapshotError::TooOld { oldest: 11 }));
    assert_eq!(store.at(11, t0 + s(111)), Err(SnapshotError::TooOld { oldest: 12 }));
    assert_eq!(store.snapshot_count(), 3);
    store.expire(t0 + s(71));
    assert_eq!(store.snapshot_count(), 2);
    assert_eq!(store.at(10, t0 + s(71)), Err(SnapshotError::TooOld { oldest: 11 }));
    assert_eq!(store.at(11, t0 + s(71)).map(|s| s.len()), Ok(1));
    // Bookmarks expire too; the current state never does.
    store.bookmark(13, t0 + s(500));
    assert_eq!(store.snapshot_count(), 1);
    assert_eq!(store.at(11, t0 + s(500)), Err(SnapshotError::TooOld { oldest: 12 }));
    assert_eq!(store.at(12, t0 + s(500)).map(|s| s.len()), Ok(2));
    assert_eq!(store.at(13, t0 + s(500)).map(|s| s.len()), Ok(2));
}

#[test]
fn snapshots_are_unaffected_by_later_changes() {
    let t0 = Instant::now();
    let mut store = Store::default();
    store.replace([cm("ns", "a", 5, &[])], 10, t0);
    let before = store.current();
    store.apply(Change::Modified(cm("ns", "a", 11, &[])), t0).unwrap();
    store.apply(Change::Added(cm("ns", "b", 12, &[])), t0).unwrap();
    assert_eq!(before.resource_version(), 10);
    assert_eq!(before.len(), 1);
    assert_eq!(before.get("ns/a").unwrap().resource_version, 5);
    assert_eq!(store.at(10, t0).unwrap(), before);
}

#[test]
fn unsynced_store_is_empty_at_rv_zero() {
    let store = Store::default();
    assert_eq!(store.current(), Snapshot::new(0, Items::new()));
    assert_eq!(store.at(1, Instant::now()), Err(SnapshotError::TooNew { current: 0 }));
    assert!(store.is_empty());
    assert_eq!(store.bytes(), 0);
}
