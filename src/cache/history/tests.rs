use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::*;
use crate::cache::testutil::{cm, labeled_pod};

fn event(
    rv: u64,
    kind: EventType,
    object: Arc<CachedObject>,
    previous: Option<Arc<CachedObject>>,
) -> Event {
    Event::new(rv, kind, object, previous, Instant::now())
}

fn web(o: &CachedObject) -> bool {
    o.label("app") == Some("web")
}

#[test]
fn a_filtered_watcher_sees_objects_enter_and_leave() {
    let web_a = labeled_pod("ns", "a", 10, "n1", &[("app", "web")]);
    let db_a = labeled_pod("ns", "a", 11, "n1", &[("app", "db")]);
    let cases = [
        (event(10, EventType::Added, web_a.clone(), None), Some(Seen::Added)),
        (event(10, EventType::Added, db_a.clone(), None), None),
        (event(11, EventType::Modified, web_a.clone(), Some(web_a.clone())), Some(Seen::Modified)),
        (event(11, EventType::Modified, db_a.clone(), Some(web_a.clone())), Some(Seen::Left)),
        (event(11, EventType::Modified, web_a.clone(), Some(db_a.clone())), Some(Seen::Added)),
        (event(11, EventType::Modified, db_a.clone(), Some(db_a.clone())), None),
        // An ADDED for an object the cache held is a change to it.
        (event(11, EventType::Added, web_a.clone(), Some(web_a.clone())), Some(Seen::Modified)),
        (event(12, EventType::Deleted, web_a.clone(), Some(web_a.clone())), Some(Seen::Deleted)),
        (event(12, EventType::Deleted, web_a.clone(), Some(db_a.clone())), None),
        // A deletion of something the cache never held reaches nobody (PrevObject is nil).
        (event(12, EventType::Deleted, web_a.clone(), None), None),
    ];
    for (n, (e, expected)) in cases.iter().enumerate() {
        assert_eq!(e.seen_by(web), *expected, "case {n}");
    }
    assert_eq!(Seen::Left.event_type(), "DELETED");
}

#[test]
fn frames_are_encoded_once_per_way_of_seeing() {
    let mut e = event(5, EventType::Added, cm("ns", "a", 5, &[]), None);
    let calls = Cell::new(0);
    let encode = |_: &Event| {
        calls.set(calls.get() + 1);
        Some(Bytes::from_static(b"frame"))
    };
    let (first, grew) = e.frame(Seen::Added, false, encode);
    assert_eq!((first.as_deref(), grew), (Some(&b"frame"[..]), 5));
    let (again, grew) = e.frame(Seen::Added, false, encode);
    assert_eq!((again.as_deref(), grew), (Some(&b"frame"[..]), 0));
    assert_eq!(calls.get(), 1);
    // The same bytes, not a copy.
    assert_eq!(first.unwrap().as_ptr(), again.unwrap().as_ptr());
    e.frame(Seen::Added, true, encode);
    assert_eq!(calls.get(), 2);
    let (none, grew) = e.frame(Seen::Left, false, |_| None);
    assert_eq!((none, grew), (None, 0));
}

#[test]
fn resuming_needs_every_event_after_the_resource_version() {
    let mut h = History::new(3, usize::MAX);
    assert_eq!(h.position_after(0), Err(TooOld { oldest: u64::MAX }));
    h.reset(100);
    assert_eq!(h.position_after(99), Err(TooOld { oldest: 100 }));
    assert_eq!(h.position_after(100), Ok(0));
    for rv in [101, 102, 105] {
        h.push(event(rv, EventType::Added, cm("ns", &format!("o{rv}"), rv, &[]), None));
    }
    assert_eq!(h.position_after(100), Ok(0));
    assert_eq!(h.position_after(102), Ok(2));
    assert_eq!(h.position_after(103), Ok(2));
    assert_eq!(h.position_after(500), Ok(3));
    // Over the count bound the oldest goes, and with it the RVs before it.
    h.push(event(106, EventType::Added, cm("ns", "o106", 106, &[]), None));
    assert_eq!(h.len(), 3);
    assert_eq!(h.start(), 101);
    assert_eq!(h.position_after(100), Err(TooOld { oldest: 101 }));
    assert_eq!(h.position_after(101), Ok(0));
    assert_eq!(h.event_mut(0).map(|e| e.rv), Some(102));
    h.invalidate();
    assert!(h.is_empty());
    assert_eq!(h.position_after(106), Err(TooOld { oldest: u64::MAX }));
}

#[test]
fn the_byte_bound_counts_objects_and_frames() {
    let object = cm("ns", "a", 1, &[]);
    let size = object.body.len();
    let mut h = History::new(1000, size * 3);
    h.reset(0);
    for rv in 1..=3 {
        h.push(event(rv, EventType::Modified, object.clone(), None));
    }
    assert_eq!((h.len(), h.bytes()), (3, size * 3));
    // A frame kept with the newest event pushes the oldest out.
    let last = h.last_mut().unwrap();
    let (_, grew) = last.frame(Seen::Modified, false, |_| Some(Bytes::from(vec![b'x'; 10])));
    h.grew(grew);
    assert_eq!(h.len(), 2);
    assert_eq!(h.start(), 1);
    assert_eq!(h.bytes(), size * 2 + 10);
    // One event larger than the bound is still kept: the newest is always resumable.
    let mut tiny = History::new(10, 1);
    tiny.reset(0);
    tiny.push(event(1, EventType::Added, object.clone(), None));
    tiny.push(event(2, EventType::Added, object, None));
    assert_eq!((tiny.len(), tiny.start()), (1, 1));
}

/// What the history can vouch for: since an instant after its last load, with nothing dropped
/// since, every object that came in since did so by a kept event (the Node authorizer's grants
/// kubeplex decides itself rest on it, `auth::node_rules`).
#[test]
fn the_history_is_complete_only_after_its_last_load_and_its_last_dropped_event() {
    let object = cm("ns", "a", 1, &[]);
    let before = Instant::now();
    let mut h = History::new(2, usize::MAX);
    h.reset(0);
    let loaded = Instant::now();
    assert!(!h.complete_since(before), "a load came after it");
    let later = loaded + std::time::Duration::from_nanos(1);
    assert!(h.complete_since(later));
    let t = |ms| loaded + std::time::Duration::from_millis(ms);
    for (rv, at) in [(1, t(10)), (2, t(20))] {
        h.push(Event::new(rv, EventType::Added, object.clone(), None, at));
    }
    assert!(h.complete_since(t(5)), "both events kept");
    // Over the bound the first goes: since before it the history cannot vouch any more.
    h.push(Event::new(3, EventType::Modified, object.clone(), None, t(30)));
    assert!(!h.complete_since(t(5)));
    assert!(!h.complete_since(t(10)));
    assert!(h.complete_since(t(11)));
    let before_load = Instant::now();
    h.reset(3);
    assert!(!h.complete_since(before_load), "a load since");
}

/// The apiserver's watch cache keeps at least 75 s of events, and no fewer than 100; kubeplex
/// keeps its window (here 60 s) the same way: an event received longer than the window before
/// the newest goes once more than 100 are kept, and a watch from before it is too old. The
/// newest 100 stay for four windows (here 240 s), not for ever: a quiet cache's history stops
/// growing.
#[test]
fn events_older_than_the_window_go_once_more_than_a_hundred_are_kept() {
    let t0 = Instant::now();
    let at = |rv: u64, secs: u64| {
        let o = cm("ns", &format!("o{rv}"), rv, &[]);
        Event::new(rv, EventType::Added, o, None, t0 + Duration::from_secs(secs))
    };
    let mut h = History::new(100_000, usize::MAX).with_window(Duration::from_secs(60));
    h.reset(1);
    // 150 events over 10 s, then nothing for a long while: all kept.
    for rv in 2..152 {
        h.push(at(rv, (rv - 2) / 15));
    }
    assert_eq!(h.len(), 150);
    assert_eq!(h.position_after(1), Ok(0));
    // An event 70 s in: every one before it is past the window; the oldest go down to 100.
    h.push(at(152, 70));
    assert_eq!(h.len(), MIN_EVENTS);
    assert_eq!(h.position_after(1), Err(TooOld { oldest: 52 }));
    assert_eq!(h.position_after(52), Ok(0));
    // Within the window, more than 100 stay.
    for rv in 153..253 {
        h.push(at(rv, 71));
    }
    assert_eq!(h.len(), 101, "the one at 70 s and the hundred at 71 s");
    // Older than the window but within four, the newest 100 stay.
    h.push(at(253, 71 + 4 * 60));
    assert_eq!(h.len(), MIN_EVENTS);
    assert_eq!(h.start(), 153);
    assert_eq!(h.position_after(153), Ok(0));
    // Past four windows they go too: only the newest is left, and a watch from before it is
    // too old (410 Expired: its client lists again, from the cache).
    h.push(at(254, 10_000));
    assert_eq!(h.len(), 1);
    assert_eq!(h.start(), 253);
    assert_eq!(h.position_after(252), Err(TooOld { oldest: 253 }));
    assert_eq!(h.position_after(253), Ok(0));
}

/// Inside a relist's gap no watch resumes (its events suit only the cache's previous state);
/// at its ends it does. Past the bound on ranges kept, the oldest one's end becomes the start:
/// everything below is refused, never anything wrongly allowed.
#[test]
fn no_resume_strictly_inside_a_refused_range() {
    let mut h = History::new(100, 1 << 20);
    h.reset(10);
    h.refuse_within(11, 20);
    assert_eq!(h.position_after(10), Ok(0));
    for rv in [11, 15, 19] {
        assert_eq!(h.position_after(rv), Err(TooOld { oldest: 20 }), "from {rv}");
    }
    assert_eq!(h.position_after(20), Ok(0));
    for i in 0..MAX_UNSURE as u64 {
        h.refuse_within(100 + 10 * i + 1, 100 + 10 * i + 10);
    }
    assert_eq!(h.start(), 20, "the first range's end");
    assert_eq!(h.position_after(19), Err(TooOld { oldest: 20 }));
    assert_eq!(h.position_after(105), Err(TooOld { oldest: 110 }));
    assert_eq!(h.position_after(110), Ok(0));
}
