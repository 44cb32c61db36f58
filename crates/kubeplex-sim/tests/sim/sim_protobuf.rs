//! Protobuf and gzip from the fake apiserver, compared with kube-apiserver's captures.

use crate::support;

use kubeplex_sim::SimBuilder;
use kubeplex_wire::codec::{from_protobuf, type_for};
use kubeplex_wire::proto::{decode_unknown, decode_watch_event, WatchFrameDecoder};
use serde_json::{json, Value};
use support::*;

fn fx_configmaps() -> Vec<Value> {
    let mut out =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fx"}})];
    out.extend(captured_fx_objects());
    out
}

/// Decodes a `k8s\0` body: (apiVersion, kind, object as JSON).
fn decode(body: &[u8]) -> (String, String, Value) {
    let env = decode_unknown(body).expect("envelope");
    let t = type_for(env.api_version, env.kind).expect("known type");
    (env.api_version.to_string(), env.kind.to_string(), from_protobuf(t, env.raw).expect("decodes"))
}

#[tokio::test]
async fn protobuf_gets_and_lists_match_the_captures() {
    let sim = SimBuilder::new().seed(fx_configmaps()).start().await.expect("sim");
    let addr = sim.addr().to_string();
    for name in
        ["cm-get-protobuf", "cm-list-protobuf", "cm-list-protobuf-fallback", "pod-list-protobuf"]
    {
        let fx = fixture(name);
        let resp = get_accept(&addr, &fx.path, fx.request_header("Accept").unwrap_or("")).await;
        assert_eq!(resp.status, 200, "{name}");
        assert_eq!(resp.header("content-type"), "application/vnd.kubernetes.protobuf", "{name}");
        let (av, kind, got) = decode(&resp.body);
        let (fav, fkind, want) = decode(&fx.body);
        assert_eq!((av, kind), (fav, fkind), "{name}: envelope");
        assert_eq!(norm_bytes(&got), norm_bytes(&want), "{name}: object");
    }
}

#[tokio::test]
async fn custom_resources_fall_back_to_json_and_refuse_protobuf_only() {
    let sim = SimBuilder::new()
        .seed(vec![json!({"apiVersion": "demo.kubeplex.io/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3}})])
        .start()
        .await
        .expect("sim");
    let addr = sim.addr().to_string();
    let path = "/apis/demo.kubeplex.io/v1/namespaces/default/widgets";
    let resp =
        get_accept(&addr, path, "application/vnd.kubernetes.protobuf, application/json").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), "application/json");
    // Unstructured objects come back with sorted keys, kind and apiVersion kept in items.
    let item = &resp.json()["items"][0];
    let keys: Vec<&str> = item.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec"]);
    let refused = get_accept(&addr, path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(refused.status, 406);
    // Custom resources have no protobuf serializer, so even the error is JSON.
    assert_eq!(refused.json()["reason"], "NotAcceptable");
}

#[tokio::test]
async fn protobuf_watch_frames_match_the_capture() {
    let sim = SimBuilder::new().seed(fx_configmaps()).start().await.expect("sim");
    let addr = sim.addr().to_string();
    let fx = fixture("watch-protobuf");
    let path = format!(
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds=4",
        sim.current_rv()
    );
    let mut w = watch(&addr, &path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(
        w.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    // The captured events, decoded.
    let mut dec = WatchFrameDecoder::new(1 << 20);
    dec.push(&fx.body);
    let mut want = Vec::new();
    while let Ok(Some(frame)) = dec.next_frame() {
        let e = decode_watch_event(&frame).expect("event");
        want.push((e.event_type.to_string(), decode(e.object).2));
    }
    // Replay the same writes.
    for (t, obj) in want.iter().filter(|(t, _)| t != "BOOKMARK") {
        let mut o = obj.clone();
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            o["metadata"].as_object_mut().expect("metadata").shift_remove(k);
        }
        let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
        match t.as_str() {
            "ADDED" => drop(sim.create(o).expect("create")),
            "MODIFIED" => drop(sim.upsert(o).expect("update")),
            "DELETED" => sim.delete("", "configmaps", "fx", &name).expect("delete"),
            other => panic!("{other}"),
        }
    }
    let mut got = Vec::new();
    while let Some(frame) = w.next_frame().await {
        let e = decode_watch_event(&frame).expect("event");
        got.push((e.event_type.to_string(), decode(e.object).2));
    }
    let norm = |v: &[(String, Value)]| {
        v.iter().map(|(t, o)| format!("{t} {}", norm_bytes(o))).collect::<Vec<_>>()
    };
    assert_eq!(norm(&got), norm(&want));
}

#[tokio::test]
async fn protobuf_streaming_list_matches_the_capture() {
    let fx = fixture("watchlist-protobuf");
    let mut dec = WatchFrameDecoder::new(1 << 20);
    dec.push(&fx.body);
    let mut want = Vec::new();
    while let Ok(Some(frame)) = dec.next_frame() {
        let e = decode_watch_event(&frame).expect("event");
        want.push((e.event_type.to_string(), decode(e.object).2));
    }
    // The state at the start: the ADDED events before the initial-events-end bookmark.
    let initial = want.iter().position(|(t, _)| t == "BOOKMARK").expect("end bookmark");
    let mut seed =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fx"}})];
    for (_, o) in &want[..initial] {
        let mut o = o.clone();
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            o["metadata"].as_object_mut().expect("metadata").shift_remove(k);
        }
        seed.push(o);
    }
    let sim = SimBuilder::new().seed(seed).start().await.expect("sim");
    let path = "/api/v1/namespaces/fx/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2";
    let mut w =
        watch(&sim.addr().to_string(), path, fx.request_header("Accept").unwrap_or("")).await;
    let mut got = Vec::new();
    for _ in 0..=initial {
        let frame = w.next_frame().await.expect("frame");
        let e = decode_watch_event(&frame).expect("event");
        got.push((e.event_type.to_string(), decode(e.object).2));
    }
    let norm = |v: &[(String, Value)]| {
        v.iter().map(|(t, o)| format!("{t} {}", norm_bytes(o))).collect::<Vec<_>>()
    };
    assert_eq!(norm(&got), norm(&want[..=initial]));
    assert_eq!(got[initial].1["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
}

#[tokio::test]
async fn large_lists_are_gzipped_like_the_apiserver() {
    let fx = fixture("cm-list-gzip");
    assert_eq!(fx.response_header("Content-Encoding"), Some("gzip"));
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fx"}})];
    for i in 0..64 {
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i:02}"), "namespace": "fx"},
            "data": {"blob": "x".repeat(4096)}}));
    }
    let sim = SimBuilder::new().seed(objects).start().await.expect("sim");
    let addr = sim.addr().to_string();
    let gz = request(
        &addr,
        http::Method::GET,
        &fx.path,
        &[("Accept", "application/json"), ("Accept-Encoding", "gzip")],
        None,
    )
    .await;
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), "gzip");
    assert_eq!(gz.header("vary"), "Accept-Encoding");
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz.body[..]), &mut plain)
        .expect("gunzip");
    let identity = get(&addr, &fx.path).await;
    assert_eq!(identity.header("content-encoding"), "");
    assert_eq!(plain, identity.body.to_vec(), "the compressed body is the same list");
    // Under 128 KiB nothing is compressed, even when allowed.
    let small = request(
        &addr,
        http::Method::GET,
        "/api/v1/namespaces/fx/configmaps?limit=2",
        &[("Accept-Encoding", "gzip")],
        None,
    )
    .await;
    assert_eq!(small.header("content-encoding"), "");
}
