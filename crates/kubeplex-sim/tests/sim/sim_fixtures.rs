//! The fake apiserver answers the captured requests as kube-apiserver 1.36 did: same status,
//! same content type, same body modulo uids, timestamps and resourceVersions.

use crate::support;

use std::time::Duration;

use http::Method;
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::*;

/// The objects of namespace `fx` as the captures show them, and `fx2`'s deployment.
fn fx_objects() -> Vec<Value> {
    let mut out = captured_fx_objects();
    out.push(fx2_deployment());
    out
}

/// The deployment of `deploy-list-table` in namespace `fx2`: its metadata as the capture shows
/// it (managedFields included), the spec the capture run created with the apiserver's
/// defaults left to the sim, and the status the controller had written.
fn fx2_deployment() -> Value {
    let captured = &fixture("deploy-list-table").json()["rows"][0]["object"]["metadata"];
    let mut metadata = json!({"name": "d", "namespace": "fx2"});
    for k in ["annotations", "managedFields"] {
        metadata[k] = captured[k].clone();
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]}}},
        "status": {"observedGeneration": 1, "terminatingReplicas": 0}})
}

async fn fx_sim() -> Sim {
    SimBuilder::new().seed(fx_objects()).start().await.expect("sim starts")
}

/// Replays a captured GET against the sim and compares the answer.
async fn assert_replays(sim: &Sim, name: &str) {
    let fx = fixture(name);
    let accept = fx.request_header("Accept").unwrap_or("application/json");
    let resp = get_accept(&sim.addr().to_string(), &fx.path, accept).await;
    assert_eq!(
        resp.status,
        fx.status,
        "{name}: status; body {}",
        String::from_utf8_lossy(&resp.body)
    );
    assert_eq!(
        resp.header("content-type"),
        fx.response_header("Content-Type").unwrap_or(""),
        "{name}: content type"
    );
    assert_eq!(resp.header("cache-control"), "no-cache, private", "{name}: cache-control");
    assert!(!resp.header("audit-id").is_empty(), "{name}: audit-id");
    assert_eq!(norm_bytes(&resp.json()), norm_bytes(&fx.json()), "{name}: body");
    assert_eq!(resp.body.last(), Some(&b'\n'), "{name}: Go's encoder ends the body with a newline");
}

#[tokio::test]
async fn lists_and_gets_match_the_captures() {
    let sim = fx_sim().await;
    for name in [
        "cm-list-json",
        "cm-list-rv0-json",
        "cm-list-page1",
        "cm-list-labelsel",
        "cm-list-labelsel-set",
        "cm-list-fieldsel-name",
        "cm-list-metadata",
        "cm-get-json",
        "cm-get-metadata",
        "cm-get-notfound",
        "pod-list-fieldsel-node",
    ] {
        assert_replays(&sim, name).await;
    }
}

#[tokio::test]
async fn tables_match_the_captures() {
    let sim = fx_sim().await;
    for name in ["cm-list-table", "pod-list-table", "deploy-list-table"] {
        let fx = fixture(name);
        let accept = fx.request_header("Accept").unwrap_or("");
        let resp = get_accept(&sim.addr().to_string(), &fx.path, accept).await;
        assert_eq!(resp.status, 200, "{name}");
        // Ages depend on when the objects were created; everything else must be identical.
        let age = |v: &Value| {
            let mut v = normalize(v);
            for row in v["rows"].as_array_mut().into_iter().flatten() {
                if let Some(cells) = row["cells"].as_array_mut() {
                    for c in cells.iter_mut().filter(|c| c.as_str().is_some_and(is_age)) {
                        *c = json!("<age>");
                    }
                }
            }
            serde_json::to_string(&v).expect("json")
        };
        assert_eq!(age(&resp.json()), age(&fx.json()), "{name}");
    }
}

fn is_age(s: &str) -> bool {
    s.len() >= 2
        && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && s.ends_with(['s', 'm', 'h', 'd'])
}

#[tokio::test]
async fn the_second_page_continues_where_the_first_ended() {
    let sim = fx_sim().await;
    let addr = sim.addr().to_string();
    let page1 = get(&addr, "/api/v1/namespaces/fx/configmaps?limit=2").await.json();
    let token = page1["metadata"]["continue"].as_str().expect("continue token").to_string();
    let tok = kubeplex_wire::continue_token::decode(&token).expect("apiserver token format");
    assert_eq!(tok.start, "/cm-b\u{0}");
    assert_eq!(tok.rv.to_string(), page1["metadata"]["resourceVersion"].as_str().unwrap_or(""));
    let page2 =
        get(&addr, &format!("/api/v1/namespaces/fx/configmaps?limit=2&continue={token}")).await;
    assert_eq!(page2.status, 200);
    assert_eq!(norm_bytes(&page2.json()), norm_bytes(&fixture("cm-list-page2").json()));
    // Every page of one list is served at the first page's resourceVersion.
    assert_eq!(page2.json()["metadata"]["resourceVersion"], page1["metadata"]["resourceVersion"]);
}

#[tokio::test]
async fn errors_match_the_captures() {
    let sim = fx_sim().await;
    for name in [
        "err-rvmatch-exact-unset",
        "err-bad-labelselector",
        "err-bad-fieldselector",
        "err-bad-continue",
        "err-watchlist-no-rvmatch",
    ] {
        let fx = fixture(name);
        let resp = get(&sim.addr().to_string(), &fx.path).await;
        assert_eq!(resp.status, fx.status, "{name}");
        assert_eq!(resp.body.as_ref(), fx.body.as_slice(), "{name}: exact bytes");
    }
}

#[tokio::test]
async fn a_future_resource_version_times_out_with_504_after_about_three_seconds() {
    let sim = fx_sim().await;
    let fx = fixture("err-too-large-rv");
    let started = std::time::Instant::now();
    let resp = get(&sim.addr().to_string(), &fx.path).await;
    let waited = started.elapsed();
    assert_eq!(resp.status, 504);
    assert_eq!(resp.header("retry-after"), "1");
    let want = String::from_utf8_lossy(&fx.body)
        .replace("current: 266", &format!("current: {}", sim.current_rv()));
    assert_eq!(String::from_utf8_lossy(&resp.body), want);
    assert!(
        waited >= Duration::from_millis(2900),
        "answered after {waited:?}, the apiserver waits ~3 s"
    );
}

#[tokio::test]
async fn a_stale_update_is_a_conflict() {
    let sim = fx_sim().await;
    let addr = sim.addr().to_string();
    let mut cm = get(&addr, "/api/v1/namespaces/fx/configmaps/cm-c").await.json();
    let stale = cm["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    cm["data"]["key"] = json!("changed");
    let ok = send_json(&addr, Method::PUT, "/api/v1/namespaces/fx/configmaps/cm-c", &cm).await;
    assert_eq!(ok.status, 200);
    cm["metadata"]["resourceVersion"] = json!(stale);
    let conflict =
        send_json(&addr, Method::PUT, "/api/v1/namespaces/fx/configmaps/cm-c", &cm).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body.as_ref(), fixture("err-conflict").body.as_slice());
}

/// Objects of a watch capture, as a client would write them (server-set fields dropped).
fn as_written(obj: &Value) -> Value {
    let mut o = obj.clone();
    // Metadata-only captures show PartialObjectMetadata; the writes were ConfigMaps.
    if o["kind"] == "PartialObjectMetadata" {
        o["kind"] = json!("ConfigMap");
        o["apiVersion"] = json!("v1");
        o["data"] = json!({"k": "1"});
    }
    if let Some(m) = o["metadata"].as_object_mut() {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            m.shift_remove(k);
        }
    }
    o
}

/// Opens the captured watch, replays the captured changes through the sim, and compares the
/// whole stream. `initial` is how many leading events are the state at the watch's start.
async fn assert_watch_replays(name: &str, initial: usize, path: &str) {
    let fx = fixture(name);
    let events = fx.events();
    let seed: Vec<Value> = events[..initial]
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| as_written(&e["object"]))
        .collect();
    let sim = SimBuilder::new()
        .seed(vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fx"}})])
        .seed(seed)
        .start()
        .await
        .expect("sim");
    let addr = sim.addr().to_string();
    let path = path.replace("{rv}", &sim.current_rv().to_string());
    let accept = fx.request_header("Accept").unwrap_or("application/json").to_string();
    let mut w = watch(&addr, &path, &accept).await;
    assert_eq!(w.status, 200);
    assert_eq!(
        w.headers.get("content-type").and_then(|v| v.to_str().ok()),
        fx.response_header("Content-Type")
    );
    let mut got = Vec::new();
    for _ in 0..initial {
        got.push(w.next().await);
    }
    for e in events[initial..].iter().filter(|e| e["type"] != "BOOKMARK") {
        let obj = as_written(&e["object"]);
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        match e["type"].as_str() {
            Some("ADDED") => {
                sim.create(obj).expect("create");
            }
            Some("MODIFIED") => {
                sim.upsert(obj).expect("update");
            }
            Some("DELETED") => sim.delete("", "configmaps", "fx", &name).expect("delete"),
            other => panic!("unexpected event type {other:?}"),
        }
        got.push(w.next().await);
    }
    // Whatever bookmarks the capture ends with, the sim sends before its timeout.
    while let Some(e) = w.next_within(Duration::from_secs(6)).await {
        got.push(e);
    }
    let rvs: Vec<u64> = got.iter().map(rv_of).collect();
    assert!(rvs[initial..].windows(2).all(|w| w[0] <= w[1]), "{name}: RVs never go back: {rvs:?}");
    let want: Vec<String> = events.iter().map(norm_bytes).collect();
    let got: Vec<String> = got.iter().map(norm_bytes).collect();
    let strip = |v: &[String]| {
        v.iter().filter(|e| !e.contains("\"BOOKMARK\"")).cloned().collect::<Vec<_>>()
    };
    assert_eq!(strip(&got), strip(&want), "{name}: events");
    let bookmarks = |v: &[String]| v.iter().filter(|e| e.contains("\"BOOKMARK\"")).count();
    if bookmarks(&want) > 0 {
        assert!(bookmarks(&got) >= 1, "{name}: a bookmark before the watch ends");
    } else {
        assert_eq!(bookmarks(&got), 0, "{name}: no bookmarks unless allowed");
    }
}

#[tokio::test]
async fn watch_from_a_resource_version_matches_the_capture() {
    assert_watch_replays(
        "watch-json",
        0,
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=4",
    )
    .await;
}

#[tokio::test]
async fn metadata_watch_matches_the_capture() {
    assert_watch_replays(
        "watch-metadata",
        0,
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=2",
    )
    .await;
}

#[tokio::test]
async fn watch_at_rv0_and_unset_start_with_the_state() {
    assert_watch_replays(
        "watch-rv0",
        4,
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion=0&timeoutSeconds=2",
    )
    .await;
    assert_watch_replays(
        "watch-rv-unset",
        4,
        "/api/v1/namespaces/fx/configmaps?watch=1&timeoutSeconds=2",
    )
    .await;
}

#[tokio::test]
async fn streaming_list_sends_state_then_the_initial_events_end_bookmark() {
    let fx = fixture("watchlist-json");
    let events = fx.events();
    let end = &events[4];
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert_watch_replays(
        "watchlist-json",
        5,
        "/api/v1/namespaces/fx/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2",
    )
    .await;
}

#[tokio::test]
async fn table_watch_matches_the_capture() {
    let fx = fixture("watch-table");
    let sim = SimBuilder::new()
        .seed(vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fx"}})])
        .start()
        .await
        .expect("sim");
    let addr = sim.addr().to_string();
    let path = format!(
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion={}&timeoutSeconds=2",
        sim.current_rv()
    );
    let mut w = watch(&addr, &path, fx.request_header("Accept").unwrap_or("")).await;
    let want = fx.events();
    let meta = |e: &Value| e["object"]["rows"][0]["object"]["metadata"].clone();
    let mut got = Vec::new();
    for e in &want {
        let m = meta(e);
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": m["name"], "namespace": "fx",
            "labels": m["labels"], "managedFields": m["managedFields"]}, "data": {"k": "1"}});
        match e["type"].as_str() {
            Some("ADDED") => drop(sim.create(obj).expect("create")),
            Some("MODIFIED") => drop(sim.upsert(obj).expect("update")),
            Some("DELETED") => sim
                .delete("", "configmaps", "fx", m["name"].as_str().unwrap_or(""))
                .expect("delete"),
            other => panic!("{other:?}"),
        }
        got.push(w.next().await);
    }
    let cells_free = |e: &Value| {
        let mut e = normalize(e);
        e["object"]["rows"][0]["cells"][2] = json!("<age>");
        serde_json::to_string(&e).expect("json")
    };
    assert_eq!(
        got.iter().map(cells_free).collect::<Vec<_>>(),
        want.iter().map(cells_free).collect::<Vec<_>>()
    );
}
