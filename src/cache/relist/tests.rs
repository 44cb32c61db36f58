//! A relist's differences as the events a watcher needs, in the order it must see them.

use super::*;
use crate::cache::testutil::cm;
use crate::cache::CachedObject;

fn encoder() -> Encoder {
    Encoder::new(crate::cache::Encoding::Json, "v1", "ConfigMap", true)
}

fn applied(change: Change, previous: Option<Arc<CachedObject>>) -> Applied {
    Applied { change, previous }
}

#[test]
fn changes_in_rv_order_then_deletions_at_the_list_rv() {
    let changes = vec![
        applied(Change::Modified(cm("a", "late", 18, &[])), Some(cm("a", "late", 3, &[]))),
        applied(Change::Deleted(cm("a", "gone", 5, &[])), Some(cm("a", "gone", 5, &[]))),
        applied(Change::Added(cm("a", "early", 12, &[])), None),
    ];
    let events = relist_events(&encoder(), changes, 10, 20).expect("the gap closes");
    let seen: Vec<_> = events.iter().map(|e| (e.kind, e.object.key.as_str(), e.rv)).collect();
    assert_eq!(
        seen,
        [
            (EventType::Added, "a/early", 12),
            (EventType::Modified, "a/late", 18),
            (EventType::Deleted, "a/gone", 20),
        ]
    );
    // The deleted object's last state, re-stamped with the list's RV as the watch cache sends it.
    let gone = &events[2].object;
    assert_eq!(gone.resource_version, 20);
    let meta = crate::wire::meta::object_meta_json(&gone.body).expect("json");
    assert_eq!(meta.resource_version, "20");
}

#[test]
fn a_change_outside_the_gap_resets_watchers() {
    // An object at or before the cache's old RV that changed means the cache was not at that
    // RV after all; one past the list's RV cannot be in the list.
    for rv in [10, 9, 21] {
        let changes = vec![applied(Change::Added(cm("a", "x", rv, &[])), None)];
        assert!(relist_events(&encoder(), changes, 10, 20).is_none(), "rv {rv}");
    }
}

#[test]
fn objects_gone_take_free_rvs_of_the_gap_never_one_rv_twice() {
    // All at the list's RV, a watcher that saw one resumes from 20 and never sees the others
    // (the soak's lost deletions). Each takes its own RV of the gap, the newest first, past
    // the ones the changes hold.
    let gone = |name| applied(Change::Deleted(cm("a", name, 5, &[])), Some(cm("a", name, 5, &[])));
    let late = applied(Change::Modified(cm("a", "late", 20, &[])), Some(cm("a", "late", 3, &[])));
    let early = applied(Change::Added(cm("a", "new", 18, &[])), None);
    let changes = vec![gone("x"), late, early, gone("y"), gone("z")];
    let events = relist_events(&encoder(), changes, 10, 20).expect("the gap closes");
    let seen: Vec<_> = events.iter().map(|e| (e.kind, e.object.key.as_str(), e.rv)).collect();
    assert_eq!(
        seen,
        [
            (EventType::Deleted, "a/x", 16),
            (EventType::Deleted, "a/y", 17),
            (EventType::Added, "a/new", 18),
            (EventType::Deleted, "a/z", 19),
            (EventType::Modified, "a/late", 20),
        ]
    );
    // Each deleted object's body carries its event's RV.
    for e in events.iter().filter(|e| e.kind == EventType::Deleted) {
        let meta = crate::wire::meta::object_meta_json(&e.object.body).expect("json");
        assert_eq!(meta.resource_version, e.rv.to_string());
    }
}

#[test]
fn more_objects_gone_than_free_rvs_reset_watchers() {
    // A gap of 2 RVs cannot have held three deletions: the cache was not where it thought.
    let gone = |name| applied(Change::Deleted(cm("a", name, 5, &[])), Some(cm("a", name, 5, &[])));
    assert!(relist_events(&encoder(), vec![gone("x"), gone("y")], 10, 12).is_some());
    assert!(relist_events(&encoder(), vec![gone("x"), gone("y"), gone("z")], 10, 12).is_none());
}

mod following {
    //! A downstream cache (a node tier watching the pool) that applies a relist's events must
    //! end at the list's state: with etcd-like RVs (each write its own revision), whatever the
    //! writes the relist's gap hid.
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;
    use crate::cache::store::{Store, StoreLimits};

    /// A write in the gap or before it: (object 0..6, what), or another resource's write.
    #[derive(Debug, Clone)]
    enum Write {
        Put(u8),
        Delete(u8),
        Elsewhere,
    }

    fn write() -> impl Strategy<Value = Write> {
        prop_oneof![
            (0..6u8).prop_map(Write::Put),
            (0..6u8).prop_map(Write::Delete),
            Just(Write::Elsewhere)
        ]
    }

    /// The objects after `writes`, from revision `rv` on; returns the state and the last revision.
    fn run(state: &mut BTreeMap<u8, u64>, writes: &[Write], mut rv: u64) -> u64 {
        for w in writes {
            match w {
                Write::Put(i) => {
                    rv += 1;
                    state.insert(*i, rv);
                }
                Write::Delete(i) if state.contains_key(i) => {
                    rv += 1;
                    state.remove(i);
                }
                Write::Delete(_) => {}
                Write::Elsewhere => rv += 1,
            }
        }
        rv
    }

    fn objects(state: &BTreeMap<u8, u64>) -> Vec<Arc<CachedObject>> {
        state.iter().map(|(i, rv)| cm("a", &format!("o{i}"), *rv, &[])).collect()
    }

    fn store() -> Store {
        Store::new(StoreLimits { max_snapshots: 64, max_snapshot_age: Duration::from_secs(60) })
    }

    proptest! {
        #[test]
        fn a_downstream_cache_that_applies_a_relists_events_holds_the_list(
            before in proptest::collection::vec(write(), 0..12),
            gap in proptest::collection::vec(write(), 0..16),
            quiet in 0..3u64,
        ) {
            let mut state = BTreeMap::new();
            let old_rv = run(&mut state, &before, 1);
            let old = objects(&state);
            // The list's RV is the newest revision, past the gap's writes (others' writes too).
            let list_rv = run(&mut state, &gap, old_rv) + quiet;
            let now = Instant::now();
            let (mut upstream, mut downstream) = (store(), store());
            upstream.replace(old.clone(), old_rv, now);
            downstream.replace(old, old_rv, now);
            let changes = upstream.replace(objects(&state), list_rv, now);
            let events = relist_events(&encoder(), changes, old_rv, list_rv)
                .expect("etcd-like RVs always fit the gap");
            let mut last = old_rv;
            for e in events {
                prop_assert!(e.rv > last && e.rv <= list_rv, "{} after {last}", e.rv);
                last = e.rv;
                let change = match e.kind {
                    EventType::Added => Change::Added(e.object),
                    EventType::Modified => Change::Modified(e.object),
                    EventType::Deleted => Change::Deleted(e.object),
                };
                prop_assert!(downstream.apply(change, now).is_ok(), "dropped at {}", e.rv);
            }
            let held: Vec<(String, u64)> = downstream
                .current()
                .items()
                .values()
                .map(|o| (o.key.to_string(), o.resource_version))
                .collect();
            let want: Vec<(String, u64)> =
                state.iter().map(|(i, rv)| (format!("a/o{i}"), *rv)).collect();
            prop_assert_eq!(held, want);
        }
    }
}
