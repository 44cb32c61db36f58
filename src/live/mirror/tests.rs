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
    snapshot
        .items()
        .values()
        .map(|o| (o.key.to_string(), o.resource_version, o.body.clone()))
        .collect()
}

/// What a protobuf cache of its own would hold of the same JSON objects.
fn as_protobuf(objects: &[CachedObject]) -> Vec<(String, u64, Bytes)> {
    let to = Transcoder::new(&configmaps_info(), Encoding::Protobuf).unwrap();
    objects
        .iter()
        .map(|o| to.object(o).unwrap())
        .map(|o| (o.key.to_string(), o.resource_version, o.body.clone()))
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

/// A step of the source's feed, or of a twin's start.
#[derive(Debug, Clone)]
enum Step {
    /// A load of these objects (by name index).
    Load(Vec<usize>),
    /// A change of one object: deleted, or written.
    Change(usize, bool),
    Bookmark,
    /// The twin is started (once).
    Attach,
    /// Its first state, rendered meanwhile, is applied.
    CatchUp,
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        proptest::collection::vec(0..NAMES.len(), 0..4).prop_map(Step::Load),
        (0..NAMES.len(), any::<bool>()).prop_map(|(i, d)| Step::Change(i, d)),
        Just(Step::Bookmark),
        Just(Step::Attach),
        Just(Step::CatchUp),
    ]
}

proptest::proptest! {
    /// Wherever in its source's feed a twin is started, and however long its first state takes
    /// to render, it ends up holding the source's objects rendered, at the source's RV, synced
    /// when the source is — no event lost or applied twice.
    #[test]
    fn a_twin_holds_its_sources_state_rendered_wherever_it_was_started(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let source = cache(Encoding::Json);
        let mirror = Arc::new(Mirror::default());
        let fed = source.clone();
        let sink = mirror.sink(move |e| feed::apply(&fed, e));
        let (broken, on_broken) = counting();
        let mut on_broken = Some(on_broken);
        let mut twin: Option<Arc<ResourceCache>> = None;
        let mut takeover = None;
        let mut rv = 10;
        for step in steps {
            match step {
                Step::Load(names) => {
                    rv += 1;
                    sink(Feed::LoadStarted { requested: Instant::now(), consistent: true });
                    let mut names: Vec<&str> = names.iter().map(|&i| NAMES[i]).collect();
                    names.sort();
                    names.dedup();
                    let objects = names.iter().map(|n| cm(n, rv, "")).collect();
                    sink(Feed::Loaded { objects, rv, whole: true });
                }
                Step::Change(i, delete) => {
                    rv += 1;
                    let key = format!("ns/{}", NAMES[i]);
                    let kind = match (delete, source.current().get(&key).is_some()) {
                        (true, _) => EventKind::Deleted,
                        (false, true) => EventKind::Modified,
                        (false, false) => EventKind::Added,
                    };
                    sink(Feed::Event(kind, cm(NAMES[i], rv, "")));
                }
                Step::Bookmark => {
                    rv += 1;
                    sink(Feed::Bookmark(rv));
                }
                Step::Attach => {
                    if let Some(on_broken) = on_broken.take() {
                        let t = cache(Encoding::Protobuf);
                        takeover = mirror.attach(&source, &t, transcoder(), on_broken);
                        twin = Some(t);
                    }
                }
                Step::CatchUp => {
                    if let (Some(t), Some(taken)) = (&twin, takeover.take()) {
                        mirror.caught_up(t, render_state(&transcoder(), &taken), &taken);
                    }
                }
            }
        }
        if let (Some(t), Some(taken)) = (&twin, takeover.take()) {
            mirror.caught_up(t, render_state(&transcoder(), &taken), &taken);
        }
        proptest::prop_assert_eq!(broken.load(Ordering::SeqCst), 0);
        if let Some(twin) = twin {
            proptest::prop_assert_eq!(twin.is_synced(), source.is_synced());
            if source.is_synced() {
                let objects: Vec<CachedObject> =
                    source.current().items().values().map(|o| (**o).clone()).collect();
                proptest::prop_assert_eq!(state(&twin), as_protobuf(&objects));
                proptest::prop_assert_eq!(twin.resource_version(), source.resource_version());
            }
        }
    }
}
