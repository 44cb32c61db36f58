//! Watches served from kubeplex's cache follow the apiserver's rules byte for byte: the same
//! request against kubeplex and against the fake apiserver (which replays kube-apiserver's
//! behaviour) gives the same events, while the upstream sees no watch but the cache's own.

use kubeplex_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use kubeplex::cache::fanout::WatchConfig;
use kubeplex_sim::seed::ClusterShape;
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::stack::Stack;
use support::*;

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const META_JSON: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const META_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

fn small() -> ClusterShape {
    ClusterShape { nodes: 4, namespaces: 3, pods: 40, configmaps: 4, services: 2 }
}

async fn stack_with(watch: WatchConfig) -> Stack {
    Stack::build_with(
        SimBuilder::new(),
        small(),
        &["pods", "pods:protobuf"],
        Duration::from_secs(600),
        watch,
    )
    .await
}

/// The sim's count of watch requests it answered for pods (any code).
fn upstream_watches(sim: &Sim) -> u64 {
    sim.metrics_text()
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"pods\"")
                && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Every frame (JSON line or protobuf frame) that arrives within `quiet` of the previous one.
async fn drain(w: &mut Watch, protobuf: bool, quiet: Duration) -> Vec<Bytes> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let next = if protobuf {
            w.next_frame_within(quiet).await
        } else {
            w.next_line_within(quiet).await
        };
        match next {
            Some(f) => out.push(f),
            None => break,
        }
    }
    out
}

fn is_bookmark(frame: &Bytes, protobuf: bool) -> bool {
    if protobuf {
        frame.windows(8).take(16).any(|w| w == b"BOOKMARK")
    } else {
        frame.starts_with(b"{\"type\":\"BOOKMARK\"")
    }
}

fn text(frames: &[Bytes]) -> Vec<String> {
    frames.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect()
}

/// A pod the scripted changes move through every transition a filtered watch can see.
fn probe_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "team-0", "labels": {"app": "probe", "tier": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    })
}

/// Creates, schedules, relabels (out of and back into `tier=a`), and deletes the probe pod,
/// with changes to other pods in between.
fn script(sim: &Sim) {
    sim.create(probe_pod()).expect("create");
    sim.modify("", "pods", "team-0", "probe", |p| p["spec"]["nodeName"] = json!("node-1"))
        .expect("schedule");
    sim.modify("", "pods", "team-0", "probe", |p| p["metadata"]["labels"]["tier"] = json!("b"))
        .expect("leave");
    sim.modify("", "pods", "team-1", "app-1-00001", |p| {
        p["metadata"]["labels"]["touched"] = json!("yes")
    })
    .expect("other");
    sim.modify("", "pods", "team-0", "probe", |p| p["metadata"]["labels"]["tier"] = json!("a"))
        .expect("enter");
    sim.delete("", "pods", "team-0", "probe").expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_from_the_cache_equal_the_apiservers_events() {
    let stack = stack_with(WatchConfig::default()).await;
    let n = stack.sim.current_rv();
    let paths = [
        format!("/api/v1/pods?watch=1&resourceVersion={n}"),
        format!("/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={n}"),
        format!("/api/v1/pods?watch=1&resourceVersion={n}&labelSelector=tier%3Da"),
        format!("/api/v1/pods?watch=1&resourceVersion={n}&fieldSelector=spec.nodeName%3Dnode-1"),
        format!("/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={n}&fieldSelector=metadata.name%3Dprobe"),
        // (`pods/probe?watch=1`, a named GET, is a get in kube-apiserver: its `GetResource`
        // route reads only GetOptions. A single object is watched by the field selector above;
        // tests/proxy/hostile_input.rs checks the named GET.)
    ];
    let mut pairs = Vec::new();
    let before_up = upstream_watches(&stack.sim);
    let before_cache = stack.served_verb_from("WATCH", "cache").await;
    for path in &paths {
        for accept in [JSON, PROTOBUF, META_JSON, META_PROTOBUF] {
            let ours = watch(&stack.addr(), path, accept).await;
            let theirs = watch(&stack.upstream(), path, accept).await;
            assert_eq!(ours.status, 200, "{path} {accept}");
            assert_eq!(
                ours.headers.get("content-type"),
                theirs.headers.get("content-type"),
                "{path} {accept}"
            );
            pairs.push((path.clone(), accept, ours, theirs));
        }
    }
    let from_cache = stack.served_verb_from("WATCH", "cache").await - before_cache;
    // Every shape is served from the cache, the protobuf spec.nodeName ones too (the protobuf
    // cache reads the node name from each pod's message).
    assert_eq!(from_cache, 20, "watches served from the cache");
    let passed = upstream_watches(&stack.sim) - before_up;
    assert_eq!(passed, 20, "the sim saw the direct watches only");

    script(&stack.sim);
    let checks = pairs.into_iter().map(|(path, accept, mut ours, mut theirs)| async move {
        let protobuf = accept.contains("protobuf");
        let quiet = Duration::from_millis(700);
        let (a, b) =
            tokio::join!(drain(&mut ours, protobuf, quiet), drain(&mut theirs, protobuf, quiet));
        let a: Vec<_> = a.into_iter().filter(|f| !is_bookmark(f, protobuf)).collect();
        let b: Vec<_> = b.into_iter().filter(|f| !is_bookmark(f, protobuf)).collect();
        assert!(!b.is_empty(), "{path} {accept}: the apiserver sent nothing");
        assert_eq!(text(&a), text(&b), "{path} {accept}");
    });
    futures_util::future::join_all(checks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_events_and_their_end_bookmark_equal_the_apiservers() {
    let stack = stack_with(WatchConfig::default()).await;
    let n = stack.sim.current_rv();
    let cases = [
        // The watch-list an informer makes: consistent, so kubeplex first checks the upstream's
        // RV, which its cache has reached.
        "/api/v1/namespaces/team-1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".to_string(),
        format!("/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={n}&labelSelector=app%3Dapp-2"),
        "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-2".to_string(),
        // The state as ADDED events, no bookmark.
        "/api/v1/namespaces/team-2/pods?watch=1&resourceVersion=0".to_string(),
        "/api/v1/namespaces/team-2/pods?watch=1".to_string(),
    ];
    for path in &cases {
        for accept in [JSON, PROTOBUF, META_JSON] {
            let before = stack.served_verb_from("WATCH", "cache").await;
            let mut ours = watch(&stack.addr(), path, accept).await;
            let mut theirs = watch(&stack.upstream(), path, accept).await;
            assert_eq!(
                stack.served_verb_from("WATCH", "cache").await,
                before + 1,
                "{path} {accept} from the cache"
            );
            let protobuf = accept.contains("protobuf");
            let quiet = Duration::from_millis(400);
            let (a, b) = tokio::join!(
                drain(&mut ours, protobuf, quiet),
                drain(&mut theirs, protobuf, quiet)
            );
            assert!(b.len() > 1, "{path} {accept}: the state has objects");
            assert_eq!(text(&a), text(&b), "{path} {accept}");
            let ends = b.last().is_some_and(|f| is_bookmark(f, protobuf));
            assert_eq!(ends, path.contains("allowWatchBookmarks"), "{path}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_version_older_than_the_history_gets_410_expired() {
    let stack = stack_with(WatchConfig::default()).await;
    for (accept, protobuf) in [(JSON, false), (PROTOBUF, true)] {
        let mut w = watch(&stack.addr(), "/api/v1/pods?watch=1&resourceVersion=3", accept).await;
        assert_eq!(w.status, 200);
        let frame = if protobuf { w.next_frame().await } else { w.next_line_within(STEP).await };
        let frame = frame.expect("an ERROR event");
        if protobuf {
            let e = kubeplex::wire::proto::decode_watch_event(&frame).expect("frame");
            assert_eq!(e.event_type, "ERROR");
            assert!(e.object.windows(7).any(|w| w == b"Expired"));
        } else {
            let e: Value = serde_json::from_slice(&frame).expect("json");
            assert_eq!(e["type"], "ERROR");
            assert_eq!(e["object"]["kind"], "Status");
            assert_eq!(e["object"]["code"], 410);
            assert_eq!(e["object"]["reason"], "Expired");
            let message = e["object"]["message"].as_str().unwrap_or("");
            assert!(message.starts_with("too old resource version: 3 ("), "{message}");
        }
        assert!(w.ends_within(STEP).await, "the stream ends after the error");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_come_periodically_and_before_the_deadline() {
    let config =
        WatchConfig { bookmark_interval: Duration::from_millis(400), ..WatchConfig::default() };
    let stack = stack_with(config).await;
    let n = stack.sim.current_rv();
    let started = tokio::time::Instant::now();
    let path = format!(
        "/api/v1/pods?watch=1&resourceVersion={n}&allowWatchBookmarks=true&timeoutSeconds=3"
    );
    let mut w = watch(&stack.addr(), &path, JSON).await;
    let first = w.next().await;
    assert_eq!(first["type"], "BOOKMARK");
    assert_eq!(
        serde_json::to_string(&first["object"]).expect("json"),
        format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{n}"}},"spec":{{"containers":null}},"status":{{}}}}"#
        )
    );
    stack
        .sim
        .modify("", "pods", "team-0", "app-0-00000", |p| p["metadata"]["labels"]["x"] = json!("1"))
        .expect("modify");
    let mut last_rv = n;
    let mut bookmarks = 1;
    while let Some(e) = w.next_within(Duration::from_secs(5)).await {
        let rv = rv_of(&e);
        assert!(rv >= last_rv, "resourceVersion went back from {last_rv} to {rv}");
        last_rv = rv;
        bookmarks += usize::from(e["type"] == "BOOKMARK");
    }
    let took = started.elapsed();
    assert!(w.ends_within(Duration::ZERO).await, "the stream ended");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(5),
        "ended after {took:?}"
    );
    assert!(bookmarks >= 4, "{bookmarks} bookmarks in 3 s at a 400 ms interval");
    assert!(last_rv > n, "the bookmarks moved to the new RV");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_compaction_reaches_open_watchers_as_events() {
    let stack = stack_with(WatchConfig::default()).await;
    let n = stack.sim.current_rv();
    let mut w = watch(
        &stack.addr(),
        &format!("/api/v1/namespaces/team-0/pods?watch=1&resourceVersion={n}"),
        JSON,
    )
    .await;
    // The upstream goes away; meanwhile pods change and its history is compacted, so the
    // cache's watch cannot resume and it must relist.
    stack.sim.stop_serving();
    stack.sim.create(probe_pod()).expect("create");
    stack
        .sim
        .modify("", "pods", "team-0", "app-0-00000", |p| p["metadata"]["labels"]["x"] = json!("1"))
        .expect("modify");
    stack.sim.delete("", "pods", "team-0", "app-3-00003").expect("delete");
    let compacted = stack.sim.compact();
    stack.sim.restart().await.expect("restart");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let e = w.next_within(Duration::from_secs(15)).await.expect("a relist difference");
        seen.push((ev(&e).0, ev(&e).1, rv_of(&e)));
    }
    let probe = stack.sim.get("", "pods", "team-0", "probe").expect("probe");
    let modified = stack.sim.get("", "pods", "team-0", "app-0-00000").expect("modified");
    assert_eq!(seen[0], ("ADDED".into(), "probe".into(), rv_of(&probe)));
    assert_eq!(seen[1], ("MODIFIED".into(), "app-0-00000".into(), rv_of(&modified)));
    assert_eq!(seen[2].0, "DELETED");
    assert_eq!(seen[2].1, "app-3-00003");
    assert!(seen[2].2 >= compacted.min(rv_of(&modified)) && seen[2].2 > seen[1].2, "{seen:?}");
    // The stream stays open: later changes follow.
    stack.sim.delete("", "pods", "team-0", "probe").expect("delete");
    let e = w.next_within(Duration::from_secs(10)).await.expect("the next change");
    assert_eq!(ev(&e).0, "DELETED");
    assert_eq!(ev(&e).1, "probe");
}

/// Writes `count` changes of one pod, each carrying `size` bytes of annotation, so a client
/// that does not read fills every buffer between it and kubeplex.
async fn big_changes(sim: &Sim, count: usize, size: usize) -> Vec<u64> {
    let blob = "x".repeat(size);
    let mut rvs = Vec::new();
    for i in 0..count {
        let v = sim
            .modify("", "pods", "team-0", "app-0-00000", |p| {
                p["metadata"]["annotations"]["blob"] = json!(format!("{i}{blob}"))
            })
            .expect("modify");
        rvs.push(rv_of(&v));
        if i % 20 == 19 {
            tokio::task::yield_now().await;
        }
    }
    rvs
}

/// Reads events until it has seen `last`, returning their RVs (bounded in time).
async fn rvs_until(w: &mut Watch, last: u64, within: Duration) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + within;
    let mut rvs = Vec::new();
    while rvs.last() != Some(&last) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(e) = w.next_within(left).await else { break };
        if e["type"] != "BOOKMARK" {
            rvs.push(rv_of(&e));
        }
    }
    rvs
}

async fn ended_slow(stack: &Stack) -> u64 {
    stack
        .metric(
            "kubeplex_watchers_ended_total{encoding=\"json\",reason=\"slow\",resource=\"pods/v1\"}",
        )
        .await
}

/// Watchers ended as slow, waiting up to `within` for the first.
async fn ended_slow_within(stack: &Stack, within: Duration) -> u64 {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let ended = ended_slow(stack).await;
        if ended >= 1 || tokio::time::Instant::now() >= deadline {
            return ended;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn open_watchers(stack: &Stack) -> u64 {
    stack.metric("kubeplex_watchers{encoding=\"json\",resource=\"pods/v1\"}").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_ended_and_the_others_are_unaffected() {
    use tokio::io::AsyncWriteExt;
    let config = WatchConfig {
        queue_frames: 1000,
        slow_after: Duration::from_secs(2),
        ..WatchConfig::default()
    };
    let stack = stack_with(config).await;
    let n = stack.sim.current_rv();
    let path = format!("/api/v1/pods?watch=1&resourceVersion={n}");
    // A client that sends its request and never reads, with a small receive buffer.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut stalled = socket.connect(stack.proxy.addr).await.expect("connect");
    stalled
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: kubeplex\r\nAccept: application/json\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("request");
    let mut reader = watch(&stack.addr(), &path, JSON).await;
    for _ in 0..100 {
        if open_watchers(&stack).await == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open_watchers(&stack).await, 2);

    // The watcher reads while the writes go on, as it would in a cluster.
    let expected_last = n + 300;
    let reading = tokio::spawn(async move {
        let got = rvs_until(&mut reader, expected_last, Duration::from_secs(30)).await;
        (got, reader)
    });
    let writes = big_changes(&stack.sim, 300, 32 * 1024).await;
    assert_eq!(writes.last(), Some(&expected_last));
    let (got, _reader) = reading.await.expect("reader");
    assert_eq!(got, writes, "the reading watcher gets every event, in order");
    let ended = ended_slow_within(&stack, Duration::from_secs(10)).await;
    assert_eq!(ended, 1, "the stalled watcher was ended");
    assert_eq!(open_watchers(&stack).await, 1, "and is dispatched nothing more");
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http2_stream_does_not_hold_up_the_others_on_its_connection() {
    use http_body_util::{BodyExt, Empty};
    let config = WatchConfig {
        queue_frames: 1000,
        slow_after: Duration::from_secs(2),
        ..WatchConfig::default()
    };
    let stack = stack_with(config).await;
    let n = stack.sim.current_rv();
    let tcp = tokio::net::TcpStream::connect(stack.proxy.addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(8 * 1024 * 1024)
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let request = || {
        http::Request::get(format!("http://kubeplex/api/v1/pods?watch=1&resourceVersion={n}"))
            .header("accept", JSON)
            .body(Empty::<Bytes>::new())
            .expect("request")
    };
    let stalled = sender.send_request(request()).await.expect("stalled watch");
    let mut live = sender.send_request(request()).await.expect("live watch");
    assert_eq!((stalled.status().as_u16(), live.status().as_u16()), (200, 200));
    assert_eq!(live.version(), http::Version::HTTP_2);
    let last = n + 150;
    let reading = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while got.last() != Some(&last) && tokio::time::Instant::now() < deadline {
            let next = tokio::time::timeout(Duration::from_secs(5), live.body_mut().frame()).await;
            let Ok(Some(Ok(frame))) = next else { break };
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
            }
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let e: Value = serde_json::from_slice(&line).expect("event");
                got.push(rv_of(&e));
            }
        }
        got
    });
    let writes = big_changes(&stack.sim, 150, 32 * 1024).await;
    let got = reading.await.expect("reader");
    assert_eq!(got, writes, "the live stream got every event while its neighbour stalled");
    let ended = ended_slow_within(&stack, Duration::from_secs(10)).await;
    assert_eq!(ended, 1, "the stalled stream's watcher was ended");
    drop(stalled);
}

/// A custom resource's watch (unstructured JSON: sorted keys, kind and apiVersion in every
/// object, its own BOOKMARK shape) from the cache equals the apiserver's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_watches_equal_the_apiservers() {
    let widget = |name: &str, size: u64| {
        json!({"apiVersion": "demo.kubeplex.io/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "team-0", "labels": {"size": size.to_string()}},
            "spec": {"size": size}})
    };
    let stack = Stack::build_with(
        SimBuilder::new(),
        small(),
        &["demo.kubeplex.io/v1/widgets"],
        Duration::from_secs(600),
        WatchConfig::default(),
    )
    .await;
    stack.sim.create(widget("w1", 1)).expect("create");
    stack.sim.create(widget("w2", 2)).expect("create");
    let n = stack.sim.current_rv();
    // The cache has the two widgets once a not-older-than read at their RV answers.
    let list = format!("/apis/demo.kubeplex.io/v1/widgets?resourceVersion={n}");
    assert_eq!(get(&stack.addr(), &list).await.json()["items"].as_array().map(Vec::len), Some(2));
    let base = "/apis/demo.kubeplex.io/v1/namespaces/team-0/widgets?watch=1";
    let paths = [
        format!("{base}&resourceVersion={n}"),
        format!("{base}&resourceVersion={n}&labelSelector=size%3D1"),
        format!("{base}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={n}"),
        format!("{base}&resourceVersion=0"),
    ];
    let before = stack.served_verb_from("WATCH", "cache").await;
    let mut pairs = Vec::new();
    for path in &paths {
        for accept in [JSON, META_JSON] {
            let ours = watch(&stack.addr(), path, accept).await;
            let theirs = watch(&stack.upstream(), path, accept).await;
            pairs.push((path.clone(), accept, ours, theirs));
        }
    }
    assert_eq!(stack.served_verb_from("WATCH", "cache").await - before, 8, "served from the cache");
    stack.sim.create(widget("w3", 1)).expect("create");
    stack
        .sim
        .modify("demo.kubeplex.io", "widgets", "team-0", "w1", |w| {
            w["metadata"]["labels"]["size"] = json!("5")
        })
        .expect("leave the selection");
    stack.sim.delete("demo.kubeplex.io", "widgets", "team-0", "w2").expect("delete");
    for (path, accept, mut ours, mut theirs) in pairs {
        let quiet = Duration::from_millis(500);
        let (a, b) = tokio::join!(drain(&mut ours, false, quiet), drain(&mut theirs, false, quiet));
        assert!(b.len() >= 2, "{path} {accept}: {:?}", text(&b));
        assert_eq!(text(&a), text(&b), "{path} {accept}");
    }
}

/// Invalid watch options get the apiserver's own 422 through kubeplex (fixture
/// `err-watchlist-no-rvmatch`): kubeplex never answers a request it cannot parse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_watch_options_get_the_apiservers_422() {
    let stack = stack_with(WatchConfig::default()).await;
    let fixture = fixture("err-watchlist-no-rvmatch");
    let path =
        "/api/v1/namespaces/team-0/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true";
    let ours = get_accept(&stack.addr(), path, JSON).await;
    let theirs = get_accept(&stack.upstream(), path, JSON).await;
    assert_eq!(ours.status, 422);
    assert_eq!((ours.status, &ours.body), (theirs.status, &theirs.body));
    assert_eq!(ours.json()["reason"], fixture.json()["reason"]);
    assert_eq!(ours.json()["details"]["causes"], fixture.json()["details"]["causes"]);
}
