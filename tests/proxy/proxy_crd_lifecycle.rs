//! A custom resource's CRD changing under kubeplex's caches and watches (issue 46): deleted,
//! its version no longer served and served again, a second version added, its storage version
//! changed, created after kubeplex started. The fake apiserver does each as kube-apiserver 1.36 does
//! (`kubeplex_sim::crd`, from the captures `tests/fixtures/realcluster/custom/lifecycle.*`);
//! through kubeplex a client gets what it gets directly: the same events, the watch's end, and
//! the same bytes and codes after.

use kubeplex_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use kubeplex::cache::fanout::WatchConfig;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::SimBuilder;
use serde_json::{json, Value};
use support::stack::Stack;
use support::*;

const JSON: &str = "application/json";
const GROUP: &str = "demo.kubeplex.io";
const WIDGETS: &str = "/apis/demo.kubeplex.io/v1/namespaces/team-0/widgets";

fn small() -> ClusterShape {
    ClusterShape { nodes: 2, namespaces: 2, pods: 4, configmaps: 2, services: 1 }
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "demo.kubeplex.io/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "team-0", "labels": {"size": "1"}},
        "spec": {"size": 1}})
}

/// kubeplex with a configured cache of widgets, and `n` widgets written.
async fn widgets_cached(n: usize) -> Stack {
    let stack = Stack::build_with(
        SimBuilder::new(),
        small(),
        &["demo.kubeplex.io/v1/widgets"],
        Duration::from_secs(600),
        WatchConfig::default(),
    )
    .await;
    for i in 0..n {
        stack.sim.create(widget(&format!("w{i}"))).expect("create");
    }
    // The cache has them once a not-older-than read at their RV answers.
    let rv = stack.sim.current_rv();
    let list = get(&stack.addr(), &format!("{WIDGETS}?resourceVersion={rv}")).await;
    assert_eq!(list.json()["items"].as_array().map(Vec::len), Some(n));
    stack
}

/// Every line until the stream ends (or 10 s pass), and whether it ended.
async fn to_end(w: &mut Watch) -> (Vec<Bytes>, bool) {
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Some(line) = w.next_line_within(deadline - tokio::time::Instant::now()).await {
        lines.push(line);
    }
    (lines, w.ends_within(Duration::ZERO).await)
}

fn text(frames: &[Bytes]) -> Vec<String> {
    frames.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect()
}

/// The same GET through kubeplex and directly: status and body.
async fn same_answer(stack: &Stack, path: &str) -> (u16, String) {
    let (ours, theirs) = (get(&stack.addr(), path).await, get(&stack.upstream(), path).await);
    let body = |r: &Resp| String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!((ours.status, body(&ours)), (theirs.status, body(&theirs)), "{path}");
    (ours.status, body(&ours))
}

/// kubeplex's list and watch calls to the upstream for widgets.
async fn upstream_widget_calls(stack: &Stack) -> u64 {
    stack.metric_sum("kubeplex_upstream_calls_total", &["resource=\"widgets\""]).await
}

/// A deleted CRD, under a watch served from kubeplex's cache: the watch gets each object's
/// DELETED event as the apiserver sends them, byte for byte, and then ends, as the apiserver's
/// own does; afterwards every read — the collection, an object, the group-version's discovery
/// document — gets the apiserver's `404 page not found`, and kubeplex stops asking the upstream
/// for the resource. Created again, the resource reads as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_crd_ends_its_watches_after_its_objects_deleted_events_and_then_reads_404() {
    let stack = widgets_cached(3).await;
    let rv = stack.sim.current_rv();
    let discovery = format!("/apis/{GROUP}/v1");
    assert_eq!(same_answer(&stack, &discovery).await.0, 200);
    let path = format!("{WIDGETS}?watch=1&resourceVersion={rv}");
    let from_cache = stack.served_verb_from("WATCH", "cache").await;
    let mut ours = watch(&stack.addr(), &path, JSON).await;
    let mut theirs = watch(&stack.upstream(), &path, JSON).await;
    assert_eq!((ours.status, theirs.status), (200, 200));
    assert_eq!(stack.served_verb_from("WATCH", "cache").await - from_cache, 1, "from the cache");

    assert_eq!(stack.sim.delete_custom_resource_definition(GROUP, "widgets").expect("deleted"), 3);
    let ((a, ours_ended), (b, theirs_ended)) = tokio::join!(to_end(&mut ours), to_end(&mut theirs));
    assert!(theirs_ended && b.len() == 3, "the apiserver: {:?}", text(&b));
    assert_eq!(text(&a), text(&b), "the DELETED events");
    assert!(ours_ended, "kubeplex's watch ends as the apiserver's does");

    for path in [
        WIDGETS.to_string(),
        format!("{WIDGETS}?resourceVersion=0"),
        format!("{WIDGETS}/w0"),
        format!("{WIDGETS}?watch=1&resourceVersion={rv}"),
        discovery.clone(),
        format!("/apis/{GROUP}"),
    ] {
        let (status, body) = same_answer(&stack, &path).await;
        assert_eq!((status, body.as_str()), (404, "404 page not found\n"), "{path}");
    }
    // The stopped cache does not keep asking (it is tried again after a backoff of 30 s).
    let calls = upstream_widget_calls(&stack).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(upstream_widget_calls(&stack).await, calls, "no list or watch of a resource gone");

    stack.sim.create_custom_resource_definition(GROUP, "widgets").expect("CRD created again");
    stack.sim.create(widget("again")).expect("create");
    let (status, body) = same_answer(&stack, WIDGETS).await;
    assert_eq!(status, 200);
    let names: Vec<Value> = serde_json::from_str::<Value>(&body).expect("a list")["items"]
        .as_array()
        .map(|items| items.iter().map(|i| i["metadata"]["name"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec![json!("again")], "only the new objects");
    assert_eq!(same_answer(&stack, &discovery).await.0, 200);
}

/// A version no longer served ends watches with no event and answers `404 page not found` at
/// once; served again, its objects (still stored) read as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_no_longer_served_ends_watches_and_reads_404_until_served_again() {
    let stack = widgets_cached(2).await;
    let rv = stack.sim.current_rv();
    let path = format!("{WIDGETS}?watch=1&resourceVersion={rv}");
    let mut ours = watch(&stack.addr(), &path, JSON).await;
    let mut theirs = watch(&stack.upstream(), &path, JSON).await;

    stack.sim.serve_custom_resource(GROUP, "widgets", false).expect("not served");
    let ((a, ours_ended), (b, theirs_ended)) = tokio::join!(to_end(&mut ours), to_end(&mut theirs));
    assert!(theirs_ended && b.is_empty(), "the apiserver: {:?}", text(&b));
    assert!(ours_ended && a.is_empty(), "kubeplex: {:?}", text(&a));
    for path in
        [WIDGETS.to_string(), format!("{WIDGETS}?resourceVersion=0"), format!("{WIDGETS}/w1")]
    {
        assert_eq!(same_answer(&stack, &path).await.0, 404, "{path}");
    }

    stack.sim.serve_custom_resource(GROUP, "widgets", true).expect("served");
    let (status, body) = same_answer(&stack, WIDGETS).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("a list")["items"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(same_answer(&stack, &format!("{WIDGETS}/w1")).await.0, 200);
}

/// The storage version changed: the apiserver ends its watches with no event and answers
/// `429 storage is (re)initializing` for a moment. kubeplex's own watch comes back after the
/// upstream's `Retry-After`; its clients' watches stay open and get the next change — the
/// same event a client gets directly once it has watched again from where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_version_change_loses_no_event_of_a_watch_through_kubeplex() {
    let stack = widgets_cached(2).await;
    let rv = stack.sim.current_rv();
    let path = format!("{WIDGETS}?watch=1&resourceVersion={rv}");
    let mut ours = watch(&stack.addr(), &path, JSON).await;

    stack
        .sim
        .reinitialize_custom_resource_storage(GROUP, "widgets", Duration::from_millis(100))
        .expect("storage set up again");
    let answer = get(&stack.upstream(), WIDGETS).await;
    assert_eq!(answer.status, 429, "the apiserver meanwhile");
    assert!(String::from_utf8_lossy(&answer.body).contains("storage is (re)initializing"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    stack.sim.create(widget("after")).expect("create");

    let mut theirs = watch(&stack.upstream(), &path, JSON).await;
    let expected = theirs.next_line_within(Duration::from_secs(5)).await.expect("ADDED directly");
    let got = ours.next_line_within(Duration::from_secs(10)).await.expect("ADDED through kubeplex");
    assert_eq!(text(&[got]), text(&[expected]));
    let (status, _) = same_answer(&stack, WIDGETS).await;
    assert_eq!(status, 200);
}

/// A CRD created after kubeplex started (and after a client asked for its resource, which
/// was not served yet): the same 404 before, and the same objects and discovery after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_created_after_start_reads_as_directly() {
    let stack = Stack::build_with(
        SimBuilder::new(),
        small(),
        &["pods"],
        Duration::from_secs(600),
        WatchConfig::default(),
    )
    .await;
    assert_eq!(stack.sim.delete_custom_resource_definition(GROUP, "widgets").expect("deleted"), 0);
    let discovery = format!("/apis/{GROUP}/v1");
    for path in [WIDGETS.to_string(), format!("{WIDGETS}?resourceVersion=0"), discovery.clone()] {
        assert_eq!(same_answer(&stack, &path).await.0, 404, "{path}");
    }

    stack.sim.create_custom_resource_definition(GROUP, "widgets").expect("CRD created");
    stack.sim.create(widget("w0")).expect("create");
    stack.sim.create(widget("w1")).expect("create");
    for path in [WIDGETS.to_string(), format!("{WIDGETS}/w1"), discovery, "/apis".to_string()] {
        assert_eq!(same_answer(&stack, &path).await.0, 200, "{path}");
    }
    let rv = stack.sim.current_rv();
    let (status, body) = same_answer(&stack, &format!("{WIDGETS}?resourceVersion={rv}")).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"w0\"") && body.contains("\"w1\""), "{body}");
}

/// A version added to what the CRD serves (the fake as the captures lifecycle.unserved.* and
/// lifecycle.added.* show kube-apiserver 1.36: a watch of the old version ended with no event,
/// `429` for ~0.1 s, then the new version's objects with its apiVersion): before, its paths answer
/// `404 page not found` through kubeplex as directly; the CRD's change ends the apiserver's
/// watches and answers `429` for a moment, as any change of its spec does; after, the new
/// version's reads — discovery, list, get, a watch — answer through kubeplex as directly, each
/// object with the new version's apiVersion, while a client's watch of the old version through
/// kubeplex stays open and gets the next change at its own version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_added_reads_as_directly_and_loses_no_event_of_the_old_versions_watch() {
    const V2: &str = "/apis/demo.kubeplex.io/v2/namespaces/team-0/widgets";
    let stack = widgets_cached(2).await;
    let rv = stack.sim.current_rv();
    let v1_path = format!("{WIDGETS}?watch=1&resourceVersion={rv}");
    let mut v1_watch = watch(&stack.addr(), &v1_path, JSON).await;
    let mut v1_before = watch(&stack.upstream(), &v1_path, JSON).await;
    let discovery = format!("/apis/{GROUP}/v2");
    for path in [V2.to_string(), format!("{V2}/w1"), discovery.clone()] {
        let (status, body) = same_answer(&stack, &path).await;
        assert_eq!((status, body.as_str()), (404, "404 page not found\n"), "{path}");
    }
    let group = same_answer(&stack, &format!("/apis/{GROUP}")).await.1;
    assert!(!group.contains("v2"), "{group}");

    stack.sim.serve_custom_resource_version(GROUP, "v2", "widgets", true).expect("v2 added");
    let answer = get(&stack.upstream(), WIDGETS).await;
    assert_eq!(answer.status, 429, "the apiserver while the CRD's storage is set up again");
    let (events, ended) = to_end(&mut v1_before).await;
    assert!(ended && events.is_empty(), "the apiserver's v1 watch: {:?}", text(&events));
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The group's preferred version is now v2, the higher one.
    let group: Value =
        serde_json::from_str(&same_answer(&stack, &format!("/apis/{GROUP}")).await.1)
            .expect("an APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    assert_eq!(same_answer(&stack, &discovery).await.0, 200);
    let (status, body) = same_answer(&stack, V2).await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).expect("a list");
    assert_eq!(list["apiVersion"], "demo.kubeplex.io/v2");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|w| w["apiVersion"] == "demo.kubeplex.io/v2"), "{body}");
    let (status, body) = same_answer(&stack, &format!("{V2}/w1")).await;
    assert_eq!(status, 200);
    assert!(body.starts_with(r#"{"apiVersion":"demo.kubeplex.io/v2","kind":"Widget","#), "{body}");
    let (status, body) = same_answer(&stack, WIDGETS).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"{"apiVersion":"demo.kubeplex.io/v1","kind":"Widget","#), "{body}");

    // A change after: the v1 watch through kubeplex gets it at v1 (nothing lost across the
    // apiserver's ended watch), a v2 watch through kubeplex at v2, each as a client directly.
    let rv = stack.sim.current_rv();
    let v2_path = format!("{V2}?watch=1&resourceVersion={rv}");
    let mut v2_watch = watch(&stack.addr(), &v2_path, JSON).await;
    let mut v2_direct = watch(&stack.upstream(), &v2_path, JSON).await;
    let mut v1_direct =
        watch(&stack.upstream(), &format!("{WIDGETS}?watch=1&resourceVersion={rv}"), JSON).await;
    stack.sim.create(widget("after")).expect("create");
    let expected = v1_direct.next_line_within(Duration::from_secs(5)).await.expect("v1 directly");
    let got =
        v1_watch.next_line_within(Duration::from_secs(10)).await.expect("v1 through kubeplex");
    assert_eq!(text(&[got]), text(&[expected]));
    let expected = v2_direct.next_line_within(Duration::from_secs(5)).await.expect("v2 directly");
    assert!(String::from_utf8_lossy(&expected).contains(r#""apiVersion":"demo.kubeplex.io/v2""#));
    let got =
        v2_watch.next_line_within(Duration::from_secs(10)).await.expect("v2 through kubeplex");
    assert_eq!(text(&[got]), text(&[expected]));
}
