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
