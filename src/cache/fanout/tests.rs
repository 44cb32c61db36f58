use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use super::*;
use crate::cache::history::EventType;
use crate::cache::object::Encoding;
use crate::cache::testutil::labeled_pod;

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

fn waker() -> Waker {
    Waker::from(Arc::new(Noop))
}

fn fanout(queue_frames: usize) -> (FanOut, usize) {
    let config = WatchConfig { queue_frames, ..WatchConfig::default() };
    let mut f = FanOut::new(Arc::new(Encoder::new(Encoding::Json, "v1", "Pod", true)), &config);
    f.history.reset(0);
    (f, queue_frames)
}

fn node(n: &str) -> Filter {
    Filter {
        field: Some(FieldSelector::parse(&format!("spec.nodeName={n}")).unwrap()),
        ..Filter::default()
    }
}

fn publish(
    f: &mut FanOut,
    rv: u64,
    kind: EventType,
    obj: Arc<CachedObject>,
    prev: Option<Arc<CachedObject>>,
) -> Dispatched {
    f.publish(Event::new(rv, kind, obj, prev, Instant::now()))
}

/// (type, name, rv) of every frame in the queue.
fn drain(q: &Queue) -> Vec<(String, String, u64)> {
    match q.take(usize::MAX, &waker()) {
        Next::Frames(frames) => frames
            .iter()
            .map(|q| {
                let v: serde_json::Value = serde_json::from_slice(&q.frame).unwrap();
                let rv: u64 =
                    v["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                assert_eq!(rv, q.rv, "a frame's RV is its event's");
                (
                    v["type"].as_str().unwrap().to_string(),
                    v["object"]["metadata"]["name"].as_str().unwrap().to_string(),
                    rv,
                )
            })
            .collect(),
        Next::Empty => Vec::new(),
        Next::Closed(why) => panic!("closed: {why:?}"),
    }
}

fn t(kind: &str, name: &str, rv: u64) -> (String, String, u64) {
    (kind.to_string(), name.to_string(), rv)
}

#[test]
fn node_watchers_see_only_their_nodes_pods_and_scheduling() {
    let (mut f, cap) = fanout(100);
    let (_, all) = f.add(Filter::default(), false, 0, None, cap);
    let (_, n1) = f.add(node("n1"), false, 0, None, cap);
    let (_, n2) = f.add(node("n2"), false, 0, None, cap);
    let pending = labeled_pod("ns", "p", 1, "", &[]);
    publish(&mut f, 1, EventType::Added, pending.clone(), None);
    let on_n1 = labeled_pod("ns", "p", 2, "n1", &[]);
    let done = publish(&mut f, 2, EventType::Modified, on_n1.clone(), Some(pending));
    assert_eq!(done, Dispatched { frames: 2, slow: 0 }, "only the all-pods and node-1 watchers");
    let other = labeled_pod("ns", "q", 3, "n2", &[]);
    publish(&mut f, 3, EventType::Added, other.clone(), None);
    let deleted = labeled_pod("ns", "p", 4, "n1", &[]);
    publish(&mut f, 4, EventType::Deleted, deleted, Some(on_n1));
    assert_eq!(
        drain(&all),
        [t("ADDED", "p", 1), t("MODIFIED", "p", 2), t("ADDED", "q", 3), t("DELETED", "p", 4)]
    );
    assert_eq!(drain(&n1), [t("ADDED", "p", 2), t("DELETED", "p", 4)]);
    assert_eq!(drain(&n2), [t("ADDED", "q", 3)]);
}

#[test]
fn leaving_a_selection_is_a_deletion_at_the_events_resource_version() {
    let (mut f, cap) = fanout(100);
    let web = Filter { label: Some(LabelSelector::parse("app=web").unwrap()), ..Filter::default() };
    let (_, w) = f.add(web.clone(), false, 0, None, cap);
    let (_, w2) = f.add(web, false, 0, None, cap);
    let a = labeled_pod("ns", "a", 5, "n1", &[("app", "web")]);
    publish(&mut f, 5, EventType::Added, a.clone(), None);
    publish(
        &mut f,
        6,
        EventType::Modified,
        labeled_pod("ns", "a", 6, "n1", &[("app", "db")]),
        Some(a),
    );
    let (q1, q2) = match (w.take(usize::MAX, &waker()), w2.take(usize::MAX, &waker())) {
        (Next::Frames(a), Next::Frames(b)) => (a, b),
        other => panic!("{other:?}"),
    };
    // Both watchers got the very same bytes.
    assert_eq!(q1[1].frame.as_ptr(), q2[1].frame.as_ptr());
    let left: serde_json::Value = serde_json::from_slice(&q1[1].frame).unwrap();
    assert_eq!(left["type"], "DELETED");
    assert_eq!(left["object"]["metadata"]["labels"]["app"], "web", "the previous state");
    assert_eq!(left["object"]["metadata"]["resourceVersion"], "6", "at the event's RV");
}

#[test]
fn a_watcher_over_its_budget_is_ended_and_the_others_go_on() {
    let (mut f, _) = fanout(3);
    let (_, slow) = f.add(Filter::default(), false, 0, None, 3);
    let (_, fast) = f.add(Filter::default(), false, 0, None, 3);
    let mut received = Vec::new();
    for rv in 1..=5 {
        let done = publish(
            &mut f,
            rv,
            EventType::Added,
            labeled_pod("ns", &format!("p{rv}"), rv, "n", &[]),
            None,
        );
        assert_eq!(done.slow, u64::from(rv == 4), "rv {rv}");
        received.extend(drain(&fast));
    }
    assert_eq!(received.len(), 5);
    assert!(matches!(slow.take(usize::MAX, &waker()), Next::Closed(Closed::Slow)));
    assert_eq!(f.len(), 1, "the ended watcher is dispatched nothing more");
}

#[test]
fn a_frame_waiting_too_long_ends_its_watcher() {
    let (mut f, cap) = fanout(100);
    let (_, q) = f.add(Filter::default(), false, 0, None, cap);
    publish(&mut f, 1, EventType::Added, labeled_pod("ns", "p", 1, "n", &[]), None);
    let now = Instant::now();
    assert_eq!(f.end_slow(now, Duration::from_secs(30)), 0);
    assert_eq!(f.end_slow(now + Duration::from_secs(31), Duration::from_secs(30)), 1);
    assert!(matches!(q.take(usize::MAX, &waker()), Next::Closed(Closed::Slow)));
    assert!(f.is_empty());
}

#[test]
fn a_resumed_watch_replays_the_history_after_its_resource_version() {
    let (mut f, cap) = fanout(100);
    let a = labeled_pod("ns", "a", 1, "n", &[]);
    publish(&mut f, 1, EventType::Added, a.clone(), None);
    publish(&mut f, 2, EventType::Modified, labeled_pod("ns", "a", 2, "n", &[]), Some(a));
    publish(&mut f, 3, EventType::Added, labeled_pod("ns", "b", 3, "n", &[]), None);
    let from = f.history.position_after(1).unwrap();
    let (_, q) = f.add(Filter::default(), false, 3, Some(from), cap);
    publish(&mut f, 4, EventType::Added, labeled_pod("ns", "c", 4, "n", &[]), None);
    assert_eq!(drain(&q), [t("MODIFIED", "a", 2), t("ADDED", "b", 3), t("ADDED", "c", 4)]);
    // A watch from an RV ahead of the cache skips the events up to it.
    let (_, ahead) = f.add(Filter::default(), false, 6, None, cap);
    publish(&mut f, 5, EventType::Added, labeled_pod("ns", "d", 5, "n", &[]), None);
    publish(&mut f, 7, EventType::Added, labeled_pod("ns", "e", 7, "n", &[]), None);
    assert_eq!(drain(&ahead), [t("ADDED", "e", 7)]);
}

#[test]
fn closing_every_watcher_ends_their_streams() {
    let (mut f, cap) = fanout(100);
    let (id, a) = f.add(Filter::default(), false, 0, None, cap);
    let (_, b) = f.add(node("n1"), false, 0, None, cap);
    f.close_all(Closed::Reset);
    assert!(matches!(a.take(1, &waker()), Next::Closed(Closed::Reset)));
    assert!(matches!(b.take(1, &waker()), Next::Closed(Closed::Reset)));
    assert!(f.is_empty());
    f.remove(id);
    assert_eq!(
        publish(&mut f, 1, EventType::Added, labeled_pod("ns", "p", 1, "n1", &[]), None),
        Dispatched::default()
    );
}
