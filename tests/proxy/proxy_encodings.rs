//! One upstream list+watch per resource, whatever encodings its readers want (issue 31): a
//! cache in one encoding feeds the other encoding's cache of the same resource and scope, its
//! objects rendered with the 1.36 schema (`live::mirror`), byte for byte what the apiserver
//! sends; an object the schema cannot render exactly sends that encoding back to a watch of its
//! own.

use std::time::Duration;

use kubeplex_test_support as support;
use serde_json::{json, Value};
use support::shapes;
use support::stack::Stack;
use support::watchers::{apiserver_state, small_pod};
use support::*;

const JSON: &str = "application/json";
const PB: &str = "application/vnd.kubernetes.protobuf";
const META: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const META_PB: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// The caches `/debug/caches` shows.
async fn caches(stack: &Stack) -> Vec<Value> {
    let admin = stack.proxy.admin_addr.expect("admin").to_string();
    let body = get(&admin, "/debug/caches").await.body;
    let v: Value = serde_json::from_slice(&body).expect("json");
    v["caches"].as_array().cloned().unwrap_or_default()
}

/// kubeplex's own list and watch calls upstream for a resource in an encoding (its reflectors'
/// loads and watches; proofs not counted).
async fn reflector_calls(stack: &Stack, resource: &str, encoding: &str) -> u64 {
    let mut total = 0;
    for verb in ["list", "watch", "watchlist", "reader_list"] {
        let labels = [
            format!("resource=\"{resource}\""),
            format!("encoding=\"{encoding}\""),
            format!("verb=\"{verb}\""),
        ];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        total += stack.metric_sum("kubeplex_upstream_calls_total", &labels).await;
    }
    total
}

/// Asks `path` of kubeplex (until its cache answers, at most a few seconds) and of the
/// apiserver: the same status, type and bytes.
async fn same_from_cache(stack: &Stack, path: &str, accept: &str) {
    let mut served = false;
    for _ in 0..50 {
        let before = stack.served_from("cache").await;
        let ours = get_accept(&stack.addr(), path, accept).await;
        let theirs = get_accept(&stack.upstream(), path, accept).await;
        assert_eq!(ours.status, theirs.status, "{path} ({accept})");
        assert_eq!(ours.header("content-type"), theirs.header("content-type"), "{path}");
        assert!(
            ours.body == theirs.body,
            "{path} ({accept}): bodies differ\nkubeplex: {}\napiserver: {}",
            String::from_utf8_lossy(&ours.body[..ours.body.len().min(400)]),
            String::from_utf8_lossy(&theirs.body[..theirs.body.len().min(400)])
        );
        if stack.served_from("cache").await > before {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "{path} ({accept}) was never answered from the cache");
}

#[tokio::test]
async fn readers_of_both_encodings_cost_one_upstream_list_and_watch() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let (addr, upstream) = (stack.addr(), stack.upstream());
    // The apiserver's pod watches so far: the JSON cache's (a pool tier's, through two tiers).
    let watches_before = stack.upstream_calls("WATCH");
    // A protobuf watch (the kubelet's, kube-proxy's encoding) and a JSON one, from the state:
    // the state's ADDED events, then a change, each the apiserver's bytes.
    let path = "/api/v1/pods?watch=1&resourceVersion=0";
    let n = apiserver_state(&stack, "/api/v1/pods?resourceVersion=0").await.len();
    let mut watches = Vec::new();
    for accept in [PB, JSON] {
        let mut ours = watch(&addr, path, accept).await;
        let mut theirs = watch(&upstream, path, accept).await;
        let want = theirs.next_raw(accept, n).await;
        assert_eq!(ours.next_raw(accept, n).await, want, "{accept}: the state");
        watches.push((accept, ours, theirs));
    }
    stack.sim.create(small_pod("team-1", "late", "b", "node-2")).expect("create");
    for (accept, ours, theirs) in &mut watches {
        let want = theirs.next_raw(accept, 1).await;
        assert_eq!(ours.next_raw(accept, 1).await, want, "{accept}: the change");
    }
    // Lists in every representation the apiserver offers, from the caches.
    for accept in [PB, META_PB, JSON, META, TABLE] {
        same_from_cache(&stack, "/api/v1/pods?resourceVersion=0", accept).await;
        same_from_cache(&stack, "/api/v1/namespaces/team-1/pods?resourceVersion=0", accept).await;
    }
    // The apiserver saw no watch of pods but this test's own two direct ones: through two
    // tiers, neither the front tier nor the pool behind it watches protobuf.
    assert_eq!(stack.upstream_calls("WATCH") - watches_before, 2, "the direct watches only");
    // One reflector: the JSON cache's. The protobuf cache is rendered from it.
    assert!(reflector_calls(&stack, "pods/v1", "json").await >= 1);
    assert_eq!(reflector_calls(&stack, "pods/v1", "protobuf").await, 0, "no protobuf watch");
    let all = caches(&stack).await;
    let pods: Vec<&Value> = all.iter().filter(|c| c["resource"] == "pods/v1").collect();
    assert_eq!(pods.len(), 2, "{all:?}");
    let pb = pods.iter().find(|c| c["encoding"] == "protobuf").expect("the protobuf cache");
    assert_eq!(pb["rendered_from"], "json");
    assert_eq!(pb["synced"], true);
    assert_eq!(pb["objects"], pods[0]["objects"]);
    assert_eq!(pb["resource_version"], pods[0]["resource_version"]);
}

/// A cache rendered from the other encoding's shares its source's freshness proofs: consistent
/// lists of both encodings that arrive together (a pool's node tiers reading pods in protobuf
/// for their kubelets and in JSON for their CNI agents) are proven by one metadata list of the
/// scope, not one per encoding.
#[tokio::test]
async fn consistent_reads_of_both_encodings_share_their_proof() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let addr = stack.addr();
    // The protobuf cache, rendered from the JSON one.
    same_from_cache(&stack, "/api/v1/pods?resourceVersion=0", PB).await;
    let proofs = || {
        stack.metric_sum(
            "kubeplex_upstream_calls_total",
            &["resource=\"pods/v1\"", "verb=\"proof_list\""],
        )
    };
    let cached = || stack.served_from("cache");
    let (before, served_before) = (proofs().await, cached().await);
    const ROUNDS: u64 = 5;
    for _ in 0..ROUNDS {
        let (json, pb) = tokio::join!(
            get_accept(&addr, "/api/v1/pods", JSON),
            get_accept(&addr, "/api/v1/pods", PB)
        );
        assert_eq!((json.status, pb.status), (200, 200));
    }
    // Each round's two reads answered from the caches, proven by one list (two rounds may
    // even share one): one per encoding would be 2 × ROUNDS.
    assert_eq!(cached().await - served_before, 2 * ROUNDS, "served from the caches");
    let sent = proofs().await - before;
    assert!((1..=ROUNDS).contains(&sent), "{sent} proof lists for {ROUNDS} pairs of reads");
}

/// The kubelet's named reads (its own pod, in protobuf) are answered by a cache rendered from
/// the JSON one, which a named read would never start on its own.
#[tokio::test]
async fn a_named_read_is_answered_from_a_cache_rendered_from_the_other_encoding() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let name = apiserver_state(&stack, "/api/v1/namespaces/team-1/pods?resourceVersion=0")
        .await
        .into_keys()
        .next()
        .expect("a pod");
    let name = name.rsplit('/').next().expect("name").to_owned();
    same_from_cache(
        &stack,
        &format!("/api/v1/namespaces/team-1/pods/{name}?resourceVersion=0"),
        PB,
    )
    .await;
    assert_eq!(reflector_calls(&stack, "pods/v1", "protobuf").await, 0);
}

/// A newer apiserver's object — a field the 1.36 schema lacks — is never rendered: the
/// protobuf cache goes back to a list+watch of its own (counted, logged), and protobuf readers
/// get the apiserver's bytes, the new field included.
#[tokio::test]
async fn an_object_the_schema_cannot_render_sends_its_encoding_to_a_watch_of_its_own() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let (addr, upstream) = (stack.addr(), stack.upstream());
    let path = "/api/v1/namespaces/team-1/pods?resourceVersion=0";
    same_from_cache(&stack, path, PB).await;
    assert_eq!(reflector_calls(&stack, "pods/v1", "protobuf").await, 0);
    let mut ours = watch(&addr, "/api/v1/pods?watch=1&resourceVersion=0", PB).await;
    let mut pod = small_pod("team-1", "newer", "b", "node-2");
    pod["metadata"]["annotations"] = json!({ kubeplex_sim::FUTURE_FIELD_ANNOTATION: "x" });
    stack.sim.create(pod).expect("create");
    // The rendered cache's watchers are ended (their clients resume, as after any reset).
    assert!(ours.ends_within(STEP).await, "the rendered cache's watch ends");
    let fallbacks = "kubeplex_cache_render_fallbacks_total";
    let mut counted = 0;
    for _ in 0..100 {
        counted =
            stack.metric_sum(fallbacks, &["resource=\"pods/v1\"", "encoding=\"protobuf\""]).await;
        if counted == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counted, 1, "{fallbacks}");
    // Protobuf reads now come from a cache of its own list+watch, the newer field intact.
    same_from_cache(&stack, path, PB).await;
    assert!(reflector_calls(&stack, "pods/v1", "protobuf").await >= 1, "a watch of its own");
    let theirs = get_accept(&upstream, path, PB).await;
    let field_99 = [0x9a, 0x06, 0x01, b'x'];
    assert!(theirs.body.windows(4).any(|w| w == field_99), "the newer field, upstream");
    let all = caches(&stack).await;
    let pb = all
        .iter()
        .find(|c| c["resource"] == "pods/v1" && c["encoding"] == "protobuf")
        .expect("a protobuf cache");
    assert!(pb.get("rendered_from").is_none(), "{pb}");
    // JSON readers still have their cache, the field included.
    same_from_cache(&stack, path, JSON).await;
}

/// Custom resources are JSON only, but their metadata comes in protobuf too (what client-go's
/// metadata informers ask for first, as the garbage collector's and quota's do): a list and a
/// get of it are written from the JSON cache — no cache or watch of their own — with the
/// apiserver's bytes (against the real apiserver's: `src/cache/custom_resource_tests.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_metadata_in_protobuf_comes_from_their_json_cache() {
    let stack = Stack::new(shapes::WATCHED, &["demo.kubeplex.io/v1/widgets"]).await;
    for (name, size) in [("w1", 1), ("w2", 2), ("w3", 3)] {
        let widget = json!({"apiVersion": "demo.kubeplex.io/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "team-0", "labels": {"size": size.to_string()},
                "annotations": {"note": "é<&>"}},
            "spec": {"size": size}});
        stack.sim.create(widget).expect("create");
    }
    let one = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let n = stack.sim.current_rv();
    for (path, accept) in [
        (format!("/apis/demo.kubeplex.io/v1/widgets?resourceVersion={n}"), META_PB),
        ("/apis/demo.kubeplex.io/v1/namespaces/team-0/widgets?resourceVersion=0".into(), META_PB),
        (
            "/apis/demo.kubeplex.io/v1/widgets?resourceVersion=0&labelSelector=size%3D2".into(),
            META_PB,
        ),
        ("/apis/demo.kubeplex.io/v1/namespaces/team-0/widgets/w1?resourceVersion=0".into(), one),
        ("/apis/demo.kubeplex.io/v1/widgets?resourceVersion=0".into(), META),
    ] {
        same_from_cache(&stack, &path, accept).await;
    }
    let all = caches(&stack).await;
    let widgets: Vec<&Value> =
        all.iter().filter(|c| c["resource"] == "widgets.demo.kubeplex.io/v1").collect();
    assert_eq!(widgets.len(), 1, "one cache, the JSON one: {all:?}");
    assert_eq!(widgets[0]["encoding"], "json");
}
