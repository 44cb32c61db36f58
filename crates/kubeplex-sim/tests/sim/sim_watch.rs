//! The fake apiserver's watch rules: resume, 410 past history, bookmarks, timeouts, selector
//! transitions, sendInitialEvents, and what fault injection does to open watches.

use crate::support;

use std::time::Duration;

use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::*;

fn cm(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}}, "data": {"k": "v"}})
}

async fn sim() -> Sim {
    SimBuilder::new().bookmark_interval(Duration::from_millis(500)).start().await.expect("sim")
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn resume_replays_exactly_the_changes_after_the_resource_version() {
    let sim = sim().await;
    sim.create(cm("a", "web")).expect("create");
    let from = sim.current_rv();
    sim.create(cm("b", "web")).expect("create");
    sim.modify("", "configmaps", "default", "a", |v| v["data"]["k"] = json!("2")).expect("modify");
    sim.delete("", "configmaps", "default", "b").expect("delete");
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("{CMS}?watch=1&resourceVersion={from}"),
        "application/json",
    )
    .await;
    let got: Vec<_> = [w.next().await, w.next().await, w.next().await].iter().map(ev).collect();
    let kinds: Vec<_> = got.iter().map(|(t, n, _)| format!("{t} {n}")).collect();
    assert_eq!(kinds, ["ADDED b", "MODIFIED a", "DELETED b"]);
    let rvs: Vec<u64> = got.iter().map(|(_, _, rv)| rv.parse().expect("rv")).collect();
    assert!(rvs[0] > from && rvs.windows(2).all(|p| p[0] < p[1]), "{rvs:?}");
    // The DELETED event carries the deletion's RV, which is the current one.
    assert_eq!(rvs[2], sim.current_rv());
    assert!(w.next_within(Duration::from_millis(300)).await.is_none(), "nothing else");
}

#[tokio::test]
async fn a_resource_version_older_than_history_gets_a_410_error_event() {
    let sim = sim().await;
    sim.create(cm("a", "web")).expect("create");
    let old = sim.current_rv();
    sim.create(cm("b", "web")).expect("create");
    let compacted = sim.compact();
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("{CMS}?watch=1&resourceVersion={}", old - 1),
        "application/json",
    )
    .await;
    assert_eq!(w.status, 200, "the error comes inside the stream");
    let e = w.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert_eq!(
        e["object"]["message"],
        format!("too old resource version: {} ({compacted})", old - 1)
    );
    assert!(w.ends_within(Duration::from_secs(2)).await, "the stream ends after the error");
}

/// The bookmark rules measured on kube-apiserver 1.36 (`bookmark-probe-timing.json`): a watch
/// from an older RV C gets, after a consistent list has answered R, one BOOKMARK at R about
/// T-2 s into a `timeoutSeconds=T` watch (on the 1 s dispatch tick); with T=2 none; a watch
/// started at the current RV none; a watch without `allowWatchBookmarks` none.
#[tokio::test]
async fn bookmarks_follow_the_apiservers_timing_and_resource_version_rules() {
    // The apiserver's bookmark frequency (a minute): only the pre-timeout bookmark is due.
    let sim = SimBuilder::new().start().await.expect("sim");
    sim.create(cm("a", "web")).expect("create");
    let c = sim.current_rv();
    // Other resources move the cluster's RV on; configmaps stay quiet.
    for i in 0..3 {
        sim.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("s{i}"), "namespace": "default"}}))
            .expect("secret");
    }
    let addr = sim.addr().to_string();
    let consistent = get(&addr, &format!("{CMS}?limit=1")).await.json();
    let r: u64 =
        consistent["metadata"]["resourceVersion"].as_str().expect("rv").parse().expect("n");
    assert!(r > c, "the consistent list is at the cluster's RV ({r}), past the configmaps' ({c})");
    let open = |q: String| {
        let addr = addr.clone();
        async move { watch(&addr, &format!("{CMS}?watch=1&{q}"), "application/json").await }
    };
    let started = std::time::Instant::now();
    let mut t3 =
        open(format!("resourceVersion={c}&allowWatchBookmarks=true&timeoutSeconds=3")).await;
    let mut t2 =
        open(format!("resourceVersion={c}&allowWatchBookmarks=true&timeoutSeconds=2")).await;
    let mut at_r =
        open(format!("resourceVersion={r}&allowWatchBookmarks=true&timeoutSeconds=3")).await;
    let mut without = open(format!("resourceVersion={c}&timeoutSeconds=3")).await;
    let b = t3.next().await;
    let at = started.elapsed();
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(b["object"]["kind"], "ConfigMap");
    assert_eq!(rv_of(&b), r, "the bookmark carries the consistent list's RV");
    // A bookmark object carries only kind, apiVersion and metadata.resourceVersion.
    assert_eq!(b["object"]["metadata"].as_object().map(|m| m.len()), Some(1));
    assert!(
        // Due at 1 s, sent on the next 1 s tick: by 2 s, with room for a loaded machine.
        at >= Duration::from_millis(950) && at < Duration::from_millis(2500),
        "due 2 s before the 3 s deadline, sent on the next 1 s tick: came at {at:?}"
    );
    for (name, w) in [
        ("timeoutSeconds=2", &mut t2),
        ("at the current RV", &mut at_r),
        ("not allowed", &mut without),
    ] {
        assert!(w.next_within(Duration::from_millis(3500)).await.is_none(), "{name}: no bookmark");
    }
    assert!(t3.ends_within(Duration::from_secs(2)).await, "the 3 s watch ends at its deadline");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "timeoutSeconds=3 ended after {took:?}");
}

#[tokio::test]
async fn filtered_watches_see_objects_enter_and_leave_the_selection() {
    let sim = sim().await;
    let rv = sim.current_rv();
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("{CMS}?watch=1&resourceVersion={rv}&labelSelector=app%3Dweb"),
        "application/json",
    )
    .await;
    sim.create(cm("x", "db")).expect("create");
    sim.modify("", "configmaps", "default", "x", |v| v["metadata"]["labels"]["app"] = json!("web"))
        .expect("in");
    let added = w.next().await;
    assert_eq!(ev(&added).0, "ADDED", "entering the selection is ADDED");
    sim.modify("", "configmaps", "default", "x", |v| v["data"]["k"] = json!("2")).expect("change");
    assert_eq!(ev(&w.next().await).0, "MODIFIED");
    sim.modify("", "configmaps", "default", "x", |v| v["metadata"]["labels"]["app"] = json!("db"))
        .expect("out");
    let left = w.next().await;
    assert_eq!(ev(&left).0, "DELETED", "leaving the selection is DELETED");
    // As the apiserver sends it: the previous state (still matching) with the new RV.
    assert_eq!(left["object"]["metadata"]["labels"]["app"], "web");
    assert_eq!(rv_of(&left), sim.current_rv());
    sim.delete("", "configmaps", "default", "x").expect("delete");
    assert!(
        w.next_within(Duration::from_millis(300)).await.is_none(),
        "deleting a non-matching object is not seen"
    );
}

#[tokio::test]
async fn send_initial_events_then_the_end_bookmark_then_changes() {
    let sim = sim().await;
    for n in ["b", "a", "c"] {
        sim.create(cm(n, "web")).expect("create");
    }
    let list_rv = sim.current_rv();
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
        "application/json",
    )
    .await;
    let initial: Vec<_> = [w.next().await, w.next().await, w.next().await].iter().map(ev).collect();
    assert_eq!(
        initial.iter().map(|e| format!("{} {}", e.0, e.1)).collect::<Vec<_>>(),
        ["ADDED a", "ADDED b", "ADDED c"]
    );
    let end = w.next().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(rv_of(&end), list_rv);
    sim.create(cm("d", "web")).expect("create");
    assert_eq!(ev(&w.next().await).1, "d");
    // sendInitialEvents=false starts at "now": no synthetic events.
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("{CMS}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"),
        "application/json",
    )
    .await;
    sim.create(cm("e", "web")).expect("create");
    assert_eq!(ev(&w.next().await), ("ADDED".into(), "e".into(), sim.current_rv().to_string()));
}

#[tokio::test]
async fn protobuf_watch_of_pods_by_node() {
    let pod = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    };
    let sim = sim().await;
    let rv = sim.current_rv();
    let mut w = watch(
        &sim.addr().to_string(),
        &format!("/api/v1/pods?watch=1&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dn1"),
        "application/vnd.kubernetes.protobuf",
    )
    .await;
    sim.create(pod("p-other", "n2")).expect("create");
    sim.create(pod("p-mine", "n1")).expect("create");
    let frame = w.next_frame().await.expect("a frame");
    let e = kubeplex_wire::proto::decode_watch_event(&frame).expect("event");
    assert_eq!(e.event_type, "ADDED");
    let env = kubeplex_wire::proto::decode_unknown(e.object).expect("envelope");
    assert_eq!((env.api_version, env.kind), ("v1", "Pod"));
    let meta = kubeplex_wire::proto::object_meta(env.raw).expect("meta");
    assert_eq!(meta.name, "p-mine");
}

#[tokio::test]
async fn dropping_watches_ends_every_stream_and_resume_loses_nothing() {
    let sim = sim().await;
    let rv = sim.current_rv();
    let addr = sim.addr().to_string();
    let mut w =
        watch(&addr, &format!("{CMS}?watch=1&resourceVersion={rv}"), "application/json").await;
    sim.create(cm("a", "web")).expect("create");
    let last = rv_of(&w.next().await);
    sim.drop_watches();
    assert!(w.ends_within(Duration::from_secs(2)).await, "dropped watch ends");
    sim.create(cm("b", "web")).expect("create");
    let mut again =
        watch(&addr, &format!("{CMS}?watch=1&resourceVersion={last}"), "application/json").await;
    assert_eq!(ev(&again.next().await).1, "b", "resuming from the last RV replays what was missed");
}

#[tokio::test]
async fn restart_refuses_connections_then_serves_the_same_state() {
    let sim = sim().await;
    sim.create(cm("kept", "web")).expect("create");
    let addr = sim.addr().to_string();
    sim.stop_serving();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        tokio::net::TcpStream::connect(&addr).await.is_err(),
        "connections are refused while stopped"
    );
    sim.restart().await.expect("restart");
    let r = get(&addr, &format!("{CMS}/kept")).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_stall_holds_requests_until_released() {
    let sim = std::sync::Arc::new(sim().await);
    sim.stall(true);
    let addr = sim.addr().to_string();
    let req = tokio::spawn(async move { get(&addr, CMS).await.status });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!req.is_finished(), "held while stalled");
    sim.stall(false);
    assert_eq!(tokio::time::timeout(STEP, req).await.expect("released").expect("join"), 200);
}

#[tokio::test]
async fn metrics_count_lists_and_open_watches_in_the_apiservers_names() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    for _ in 0..3 {
        assert_eq!(get(&addr, CMS).await.status, 200);
    }
    let _w = watch(&addr, &format!("{CMS}?watch=1"), "application/json").await;
    let text = get(&addr, "/metrics").await.body;
    let text = String::from_utf8_lossy(&text);
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix) && l.contains("resource=\"configmaps\""))
            .map(str::to_string)
    };
    let lists = line("apiserver_request_total{code=\"200\"")
        .into_iter()
        .filter(|l| l.contains("verb=\"LIST\""))
        .collect::<Vec<_>>();
    assert_eq!(lists.len(), 1, "{text}");
    assert!(lists[0].ends_with(" 3"), "{}", lists[0]);
    let open = text
        .lines()
        .find(|l| l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\""))
        .expect("gauge");
    assert!(open.ends_with(" 1"), "{open}");
}
