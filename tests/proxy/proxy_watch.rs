//! Watches through kubeplex, as a client sees them: a thousand watchers get exactly the bytes a
//! direct watch gets; client-like informers stay correct through churn, dropped watches and a
//! compaction; timeouts, bookmarks, 410s and start-from-state behave as on the apiserver.
//!
//! Needs about 4,400 open files while watches pass through (see `assert_open_files_limit`).

use kubeplex_test_support as support;
use support::shapes;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::stack::Stack;
use support::watchers::*;
use support::*;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

const JSON_WATCHERS: usize = 1000;
const PROTOBUF_WATCHERS: usize = 10;
/// Changes made before the watchers connect (replayed to them from N), then while they watch.
const CHANGES_BEFORE: usize = 10;
const CHANGES: usize = 50;

/// Change `i` of the fan-out test: 20 creates, 20 label/annotation updates, 10 deletes.
fn change(sim: &Sim, i: usize) {
    let name = |j: usize| format!("fan-{j}");
    match i {
        0..20 => {
            sim.create(small_pod("team-0", &name(i), "a", "node-1")).expect("create");
        }
        20..40 => {
            sim.modify("", "pods", "team-0", &name(i - 20), |v| {
                v["metadata"]["labels"]["phase"] = json!("b");
                v["metadata"]["annotations"] = json!({"step": i.to_string()});
            })
            .expect("modify");
        }
        _ => sim.delete("", "pods", "team-0", &name(i - 40)).expect("delete"),
    }
}

fn is_bookmark(line: &[u8]) -> bool {
    line.starts_with(br#"{"type":"BOOKMARK""#)
}

/// What one JSON watcher received: its event lines (bookmarks set aside) and any broken rule.
struct Received {
    lines: Vec<Bytes>,
    problems: Vec<String>,
}

/// Reads `CHANGES` events (and any bookmarks among them), then briefly checks nothing follows.
async fn read_json(mut w: Watch, bookmarks: bool, from: u64, until: Instant) -> Received {
    let mut got = Received { lines: Vec::new(), problems: Vec::new() };
    let mut last = from;
    while got.lines.len() < CHANGES {
        let left = until.saturating_duration_since(Instant::now());
        let Some(line) = w.next_line_within(left).await else {
            got.problems.push(format!("stream ended or stalled after {} events", got.lines.len()));
            return got;
        };
        if is_bookmark(&line) {
            let rv = serde_json::from_slice::<Value>(&line).map(|b| rv_of(&b)).unwrap_or(0);
            if !bookmarks {
                got.problems.push("a BOOKMARK without allowWatchBookmarks".into());
            } else if rv < last {
                got.problems.push(format!("bookmark {rv} after event {last}"));
            }
            last = last.max(rv);
            continue;
        }
        if let Ok(e) = serde_json::from_slice::<Value>(&line) {
            last = last.max(rv_of(&e));
        }
        got.lines.push(line);
    }
    while let Some(line) = w.next_line_within(Duration::from_millis(300)).await {
        if !is_bookmark(&line) {
            got.problems.push(format!("extra event {}", String::from_utf8_lossy(&line)));
        }
    }
    got
}

async fn read_frames(mut w: Watch) -> Vec<Bytes> {
    let mut frames = Vec::new();
    while frames.len() < CHANGES {
        match w.next_frame().await {
            Some(f) => frames.push(f),
            None => break,
        }
    }
    frames
}

fn summary(lines: &[Bytes]) -> Vec<(String, String, String)> {
    lines.iter().filter_map(|l| serde_json::from_slice::<Value>(l).ok()).map(|e| ev(&e)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watchers_get_exactly_the_direct_watchs_bytes() {
    let watchers = JSON_WATCHERS + PROTOBUF_WATCHERS;
    assert_open_files_limit(4 * watchers as u64 + 400);
    let builder = SimBuilder::new().bookmark_interval(Duration::from_secs(1));
    let stack = Stack::with_sim(builder, shapes::WATCHED, &["pods", "pods:protobuf"]).await;
    let addr = stack.addr();
    let from = rv_of(&list_ok(&addr, "/api/v1/pods?resourceVersion=0").await.json());
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    for i in 0..CHANGES_BEFORE {
        change(&stack.sim, i);
    }
    let path = |bookmarks: bool| {
        let b = if bookmarks { "&allowWatchBookmarks=true" } else { "" };
        format!("/api/v1/pods?watch=1&resourceVersion={from}{b}")
    };
    let direct = watch(&stack.upstream(), &path(false), JSON).await;
    let direct_pb = watch(&stack.upstream(), &path(false), PROTOBUF).await;
    assert_eq!((direct.status, direct_pb.status), (200, 200));

    // One task per watcher; at most 100 connecting at once so the listen backlog never fills.
    let until = Instant::now() + Duration::from_secs(45);
    let connecting = Arc::new(Semaphore::new(100));
    let (opened_tx, mut opened) = mpsc::channel::<u16>(watchers);
    let mut json_tasks = Vec::new();
    let mut pb_tasks = Vec::new();
    for i in 0..watchers {
        let (addr, connecting, opened_tx) = (addr.clone(), connecting.clone(), opened_tx.clone());
        let bookmarks = i % 2 == 0;
        let protobuf = i >= JSON_WATCHERS;
        let path = path(bookmarks && !protobuf);
        let task = tokio::spawn(async move {
            let permit = connecting.acquire_owned().await.expect("semaphore");
            let w = watch(&addr, &path, if protobuf { PROTOBUF } else { JSON }).await;
            drop(permit);
            let _ = opened_tx.send(w.status).await;
            w
        });
        if protobuf {
            pb_tasks
                .push(tokio::spawn(async move { read_frames(task.await.expect("open")).await }));
        } else {
            json_tasks.push(tokio::spawn(async move {
                read_json(task.await.expect("open"), bookmarks, from, until).await
            }));
        }
    }
    drop(opened_tx);
    for n in 0..watchers {
        let status = tokio::time::timeout_at(until, opened.recv()).await;
        assert_eq!(status, Ok(Some(200)), "watcher {n} of {watchers} did not open");
    }
    // Every watcher is connected: the rest of the changes reach them live.
    for i in CHANGES_BEFORE..CHANGES {
        change(&stack.sim, i);
    }
    let final_rv = stack.sim.current_rv();

    let want = read_json(direct, false, from, until).await;
    assert!(want.problems.is_empty(), "direct watch: {:?}", want.problems);
    let want_pb = read_frames(direct_pb).await;
    assert_eq!(want_pb.len(), CHANGES, "direct protobuf watch");
    let rvs: Vec<u64> = summary(&want.lines).iter().map(|e| e.2.parse().expect("rv")).collect();
    assert!(rvs.first() > Some(&from) && rvs.windows(2).all(|p| p[0] < p[1]), "{rvs:?}");
    assert_eq!(rvs.last(), Some(&final_rv));

    let mut bad = Vec::new();
    for (i, task) in json_tasks.into_iter().enumerate() {
        let got = tokio::time::timeout(STEP * 6, task).await.expect("watcher ends").expect("join");
        if got.lines != want.lines || !got.problems.is_empty() {
            let at = got.lines.iter().zip(&want.lines).position(|(a, b)| a != b);
            bad.push(format!(
                "watcher {i}: {:?}; first difference at {at:?}; got {:?}",
                got.problems,
                summary(&got.lines)
            ));
        }
    }
    for (i, task) in pb_tasks.into_iter().enumerate() {
        let got = tokio::time::timeout(STEP * 6, task).await.expect("watcher ends").expect("join");
        if got != want_pb {
            bad.push(format!("protobuf watcher {i}: {} frames differ or missing", got.len()));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {watchers} watchers differ from the direct watch {:?}:\n{}",
        bad.len(),
        summary(&want.lines),
        bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    // Two of the sim's WATCHes are this test's direct ones.
    let upstream_watches = stack.upstream_calls("WATCH") - 2;
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    println!(
        "upstream pod watches {upstream_watches}, watches served from the cache {cache_watches}"
    );
    assert!(upstream_watches <= 2, "the two reflectors (JSON, protobuf): {upstream_watches}");
    assert!(cache_watches >= watchers as u64, "served from the cache: {cache_watches}");
}

/// The informers of the churn test: (collection, selectors), a mix of what clients watch.
fn informer_specs() -> Vec<(&'static str, &'static str)> {
    let mut specs = Vec::new();
    for _ in 0..3 {
        specs.push(("/api/v1/pods", ""));
        specs.push(("/api/v1/namespaces/team-0/pods", ""));
        specs.push(("/api/v1/namespaces/team-0/pods", "labelSelector=phase%3Da"));
        specs.push(("/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode-1"));
    }
    specs.extend([
        ("/api/v1/pods", "labelSelector=phase!%3Da,app%3Dchurn"),
        ("/api/v1/pods", "labelSelector=phase%20in%20(b)"),
        (
            "/api/v1/namespaces/team-1/pods",
            "labelSelector=phase%3Db&fieldSelector=spec.nodeName%3Dnode-2",
        ),
        ("/api/v1/namespaces/team-0/pods", "fieldSelector=metadata.name%3Dchurn-3"),
        ("/api/v1/pods", "fieldSelector=metadata.namespace%3Dteam-1,spec.nodeName!%3Dnode-0"),
        // Matches nothing: only bookmarks move it, so it is behind when history is compacted.
        ("/api/v1/pods", "fieldSelector=metadata.name%3Dnobody"),
        ("/api/v1/namespaces/team-1/pods", ""),
        ("/api/v1/pods", "labelSelector=app%3Dchurn"),
    ]);
    specs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_stay_exact_through_churn_dropped_watches_and_compaction() {
    let builder = SimBuilder::new().bookmark_interval(Duration::from_millis(500));
    let stack = Arc::new(Stack::with_sim(builder, shapes::WATCHED, &["pods"]).await);
    seed_churn_pods(&stack.sim);
    let upstream_watches_before = stack.upstream_calls("WATCH");
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let informers: Vec<Arc<Informer>> = informer_specs()
        .into_iter()
        .map(|(c, s)| Arc::new(Informer::new(&stack.addr(), c, s)))
        .collect();
    let tasks: Vec<_> = informers
        .iter()
        .map(|i| {
            let (i, stop) = (i.clone(), stop.clone());
            tokio::spawn(async move { i.run(stop).await })
        })
        .collect();
    // Every informer has listed before the churn starts.
    let listed = eventually(STEP * 3, || async {
        informers.iter().all(|i| i.seen.lock().map(|s| s.sessions > 0).unwrap_or(false))
    })
    .await;
    assert!(listed, "informers did not start watching");

    let secs = Duration::from_secs;
    let churn = spawn_churn(stack.clone(), secs(7), Duration::from_millis(5));
    let faults = spawn_faults(
        stack.clone(),
        vec![
            (secs(1), Fault::DropWatches),
            (secs(2), Fault::DropWatches),
            (Duration::from_millis(3500), Fault::CompactAndDrop),
            (secs(5), Fault::DropWatches),
            (secs(6), Fault::DropWatches),
        ],
    );
    let writes = tokio::time::timeout(secs(30), churn).await.expect("churn ends").expect("join");
    tokio::time::timeout(STEP, faults).await.expect("faults end").expect("join");

    // The churn has stopped: every informer must come to hold exactly the apiserver's state.
    let settled = settle(&stack, &informers, secs(30)).await;
    stop_tx.send_replace(true);
    for t in tasks {
        tokio::time::timeout(STEP, t).await.expect("informer stops").expect("join");
    }
    println!("{writes} writes\n{}", settled.report.join("\n"));
    assert!(settled.converged && settled.problems.is_empty(), "{}", settled.problems.join("\n"));
    let total = |f: fn(&Seen) -> usize| {
        informers.iter().map(|i| i.seen.lock().map(|s| f(&s)).unwrap_or(0)).sum::<usize>()
    };
    assert!(writes > 100 && total(|s| s.events) > writes, "the churn reached the informers");
    let upstream_watches = stack.upstream_calls("WATCH") - upstream_watches_before;
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    println!(
        "upstream pod watches {upstream_watches}, watches served from the cache {cache_watches}"
    );
    // The reflector re-watches after
    // each of the 5 faults and relists once (a streaming list is a WATCH too).
    assert!(upstream_watches <= 5 + 2 + 2, "upstream watches: {upstream_watches}");
    assert!(cache_watches >= informers.len() as u64, "served from the cache: {cache_watches}");
}

#[tokio::test]
async fn watches_end_at_their_timeout_and_a_quiet_one_gets_a_bookmark_first() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let addr = stack.addr();
    let rv = rv_of(&list_ok(&addr, "/api/v1/pods?resourceVersion=0").await.json());
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    let started = std::time::Instant::now();
    let base = format!("/api/v1/pods?watch=1&resourceVersion={rv}");
    let mut short = watch(&addr, &format!("{base}&timeoutSeconds=2"), JSON).await;
    // The apiserver sends a bookmark about two seconds before a watch's deadline, so the
    // client can resume from it; 4 s leaves room for that.
    let mut marked =
        watch(&addr, &format!("{base}&timeoutSeconds=4&allowWatchBookmarks=true"), JSON).await;
    let mut open = watch(&addr, &base, JSON).await;
    assert_eq!((short.status, marked.status, open.status), (200, 200, 200));

    assert!(short.ends_within(Duration::from_secs(8)).await, "timeoutSeconds=2 never ended");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(8), "{took:?}");

    let b = marked.next_within(Duration::from_secs(8)).await.expect("a bookmark before the end");
    assert_eq!((b["type"].as_str(), b["object"]["kind"].as_str()), (Some("BOOKMARK"), Some("Pod")));
    assert_eq!(b["object"]["apiVersion"], "v1");
    assert!(rv_of(&b) >= rv, "bookmark {} before the watch's start {rv}", rv_of(&b));
    assert!(marked.ends_within(Duration::from_secs(8)).await, "timeoutSeconds=4 never ended");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(3500) && took < Duration::from_secs(12), "{took:?}");

    // Without timeoutSeconds the server's own (long) timeout applies.
    assert!(!open.ends_within(Duration::from_millis(500)).await, "an untimed watch ended early");
    assert!(open.next_within(Duration::from_millis(100)).await.is_none(), "nothing changed");
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    assert_eq!(cache_watches, 3, "served from the cache");
}

#[tokio::test]
async fn a_watch_from_before_compaction_gets_410_expired_and_ends() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let addr = stack.addr();
    // From the seeding, before kubeplex started watching: neither the apiserver (after the
    // compaction) nor kubeplex's cache has history that old.
    let old = 2;
    stack.sim.create(small_pod("team-0", "after", "a", "node-0")).expect("create");
    stack.sim.compact();
    let mut w = watch(&addr, &format!("/api/v1/pods?watch=1&resourceVersion={old}"), JSON).await;
    assert_eq!(w.status, 200, "the error comes inside the stream, as from the watch cache");
    let e = w.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(
        (e["object"]["kind"].as_str(), e["object"]["code"].as_u64()),
        (Some("Status"), Some(410))
    );
    assert_eq!(e["object"]["reason"], "Expired");
    let message = e["object"]["message"].as_str().unwrap_or("");
    assert!(message.starts_with(&format!("too old resource version: {old} (")), "{message}");
    assert!(w.ends_within(STEP).await, "the stream ends after the error");
}

#[tokio::test]
async fn a_watch_without_a_resource_version_starts_with_the_state() {
    let stack = Stack::new(shapes::WATCHED, &["pods"]).await;
    let (addr, upstream) = (stack.addr(), stack.upstream());
    for name in ["x-1", "x-2"] {
        stack.sim.create(small_pod("team-1", name, "b", "node-2")).expect("create");
    }
    let cache_watches_before = stack.served_verb_from("WATCH", "cache").await;
    for (n, (list, params, accept)) in [
        ("/api/v1/pods", "", JSON),
        ("/api/v1/pods", "&resourceVersion=0", JSON),
        ("/api/v1/namespaces/team-1/pods", "&labelSelector=phase%3Db", JSON),
        ("/api/v1/pods", "&resourceVersion=0", PROTOBUF),
    ]
    .into_iter()
    .enumerate()
    {
        let path = format!("{list}?watch=1{params}");
        let state =
            apiserver_state(&stack, &format!("{list}?{}", params.trim_start_matches('&'))).await;
        let mut ours = watch(&addr, &path, accept).await;
        let mut theirs = watch(&upstream, &path, accept).await;
        // The state as synthetic ADDED events, in the apiserver's order and bytes.
        let want = theirs.next_raw(accept, state.len()).await;
        assert_eq!(ours.next_raw(accept, state.len()).await, want, "{path} ({accept})");
        // Then what changes, from where the state was taken.
        stack.sim.create(small_pod("team-1", &format!("y-{n}"), "b", "node-2")).expect("create");
        let want = theirs.next_raw(accept, 1).await;
        assert_eq!(ours.next_raw(accept, 1).await, want, "{path} ({accept}): the change");
        if accept == JSON {
            let e: Value = serde_json::from_slice(&want[0]).expect("json");
            assert_eq!(ev(&e).0, "ADDED");
            assert_eq!(rv_of(&e), stack.sim.current_rv());
        }
        assert!(ours.next_line_within(Duration::from_millis(300)).await.is_none(), "{path}");
    }
    // (the resourceVersion=0 ones at
    // least; an unset resourceVersion may be answered from the cache once it is fresh).
    let cache_watches = stack.served_verb_from("WATCH", "cache").await - cache_watches_before;
    assert!(cache_watches >= 2, "served from the cache: {cache_watches}");
}
