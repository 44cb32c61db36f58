//! A JSON cache feeding a protobuf twin: the twin holds what a protobuf cache of its own would,
//! at the same RVs, whenever it was started; an object the schema cannot render breaks it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;

use super::*;
use crate::cache::fanout::WatchConfig;
use crate::cache::metrics::CacheMetrics;
use crate::cache::resource::EventKind;
use crate::cache::store::StoreLimits;
use crate::cache::testutil::configmaps_info;
use crate::cache::Encoding;

fn cache(encoding: Encoding) -> Arc<ResourceCache> {
    let metrics = CacheMetrics::new(&prometheus::Registry::new()).unwrap();
    Arc::new(ResourceCache::new(
        configmaps_info(),
        encoding,
        StoreLimits::default(),
        WatchConfig::default(),
        metrics,
    ))
}

/// A ConfigMap as the apiserver writes it in a JSON list (Go's field order, no empty members).
fn cm(name: &str, rv: u64, extra: &str) -> CachedObject {
    let body = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"app":"a"}}}},"data":{{"k":"v{rv}"}}{extra}}}"#
    );
    CachedObject::from_json_item("", "configmaps", Bytes::from(body)).unwrap()
}

/// `cache`'s objects: (key, RV, body).
fn state(cache: &ResourceCache) -> Vec<(String, u64, Bytes)> {
    let snapshot = cache.current();
    snapshot.items().values().map(|o| (o.key.clone(), o.resource_version, o.body.clone())).collect()
}

/// What a protobuf cache of its own would hold of the same JSON objects.
fn as_protobuf(objects: &[CachedObject]) -> Vec<(String, u64, Bytes)> {
    let to = Transcoder::new(&configmaps_info(), Encoding::Protobuf).unwrap();
    objects
        .iter()
        .map(|o| to.object(o).unwrap())
        .map(|o| (o.key.clone(), o.resource_version, o.body.clone()))
        .collect()
}

fn counting() -> (Arc<AtomicUsize>, OnBroken) {
    let count = Arc::new(AtomicUsize::new(0));
    let told = count.clone();
    (
        count,
        Box::new(move |_: &str| {
            told.fetch_add(1, Ordering::SeqCst);
        }),
    )
}

fn transcoder() -> Transcoder {
    Transcoder::new(&configmaps_info(), Encoding::Protobuf).unwrap()
}

#[test]
fn a_twin_started_before_the_first_load_follows_every_event() {
    let (source, twin) = (cache(Encoding::Json), cache(Encoding::Protobuf));
    let mirror = Arc::new(Mirror::default());
    let fed = source.clone();
    let sink = mirror.sink(move |e| feed::apply(&fed, e));
    let (broken, on_broken) = counting();
    assert!(mirror.attach(&source, &twin, transcoder(), on_broken).is_none(), "nothing to take");
    let requested = Instant::now();
    sink(Feed::LoadStarted { requested, consistent: true });
    sink(Feed::Loaded { objects: vec![cm("a", 5, ""), cm("b", 6, "")], rv: 7, whole: true });
    sink(Feed::Event(EventKind::Modified, cm("a", 8, "")));
    sink(Feed::Event(EventKind::Deleted, cm("b", 9, "")));
    sink(Feed::Bookmark(12));
    assert_eq!(broken.load(Ordering::SeqCst), 0);
    assert!(twin.is_synced());
    assert_eq!(twin.resource_version(), 12);
    assert_eq!(state(&twin), as_protobuf(&[cm("a", 8, "")]));
    // Its load counts as the source's does for consistent reads.
    assert_eq!(twin.loaded_since(requested), source.loaded_since(requested));
    assert!(twin.loaded_since(requested));
    assert!(mirror.has_twins());
    drop(twin);
    assert!(!mirror.has_twins(), "a stopped twin is forgotten");
}

#[test]
fn a_twin_started_later_takes_the_state_over_and_the_events_meanwhile() {
    let (source, twin) = (cache(Encoding::Json), cache(Encoding::Protobuf));
    let mirror = Arc::new(Mirror::default());
    let fed = source.clone();
    let sink = mirror.sink(move |e| feed::apply(&fed, e));
    let requested = Instant::now();
    sink(Feed::LoadStarted { requested, consistent: true });
    sink(Feed::Loaded { objects: vec![cm("a", 5, ""), cm("b", 6, "")], rv: 7, whole: true });
    let (broken, on_broken) = counting();
    let takeover = mirror.attach(&source, &twin, transcoder(), on_broken).expect("a state");
    assert_eq!(takeover.snapshot.resource_version(), 7);
    // Changes while the state is rendered wait for it.
    sink(Feed::Event(EventKind::Added, cm("c", 9, "")));
    sink(Feed::Bookmark(11));
    assert!(!twin.is_synced());
    mirror.caught_up(&twin, render_state(&transcoder(), &takeover), &takeover);
    assert_eq!(broken.load(Ordering::SeqCst), 0);
    assert!(twin.is_synced());
    assert_eq!(twin.resource_version(), 11);
    assert_eq!(state(&twin), as_protobuf(&[cm("a", 5, ""), cm("b", 6, ""), cm("c", 9, "")]));
    assert!(twin.loaded_since(requested), "the source's load marks");
    // Then it follows.
    sink(Feed::Event(EventKind::Modified, cm("c", 12, "")));
    assert_eq!(state(&twin), as_protobuf(&[cm("a", 5, ""), cm("b", 6, ""), cm("c", 12, "")]));
    assert_eq!(state(&source).len(), 3);
}

#[test]
fn an_object_the_schema_cannot_render_breaks_the_twin_not_the_source() {
    let (source, twin) = (cache(Encoding::Json), cache(Encoding::Protobuf));
    let mirror = Arc::new(Mirror::default());
    let fed = source.clone();
    let sink = mirror.sink(move |e| feed::apply(&fed, e));
    let (broken, on_broken) = counting();
    mirror.attach(&source, &twin, transcoder(), on_broken);
    sink(Feed::LoadStarted { requested: Instant::now(), consistent: true });
    sink(Feed::Loaded { objects: vec![cm("a", 5, "")], rv: 7, whole: true });
    assert!(twin.is_synced());
    // A newer apiserver's field.
    sink(Feed::Event(EventKind::Modified, cm("a", 8, r#","futureField":"x""#)));
    assert_eq!(broken.load(Ordering::SeqCst), 1, "told once");
    assert!(!twin.is_synced(), "its readers pass through; its watchers were ended");
    assert!(!mirror.has_twins());
    assert_eq!(source.resource_version(), 8, "the source has it");
    sink(Feed::Event(EventKind::Modified, cm("a", 9, "")));
    assert_eq!(broken.load(Ordering::SeqCst), 1);
    assert_eq!(twin.resource_version(), 7, "no longer fed");
}
