//! The kinds node agents read besides the core ones — `coordination.k8s.io/v1` leases,
//! `node.k8s.io/v1` runtimeclasses, `storage.k8s.io/v1` csidrivers, `networking.k8s.io/v1`
//! servicecidrs — over real loopback sockets: discovery, gets, lists and WatchLists in JSON and
//! protobuf, field selectors, and what a kubelet writes (its Lease, node and pod status,
//! events) under the Node authorizer. Also the watch and response-size metrics the load tool
//! reads.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kubeplex_sim::auth::{Auth, UserInfo};
use kubeplex_sim::{Sim, SimBuilder};
use kubeplex_wire::codec::{from_protobuf, type_for};
use kubeplex_wire::proto::{decode_list, decode_unknown, decode_watch_event, WatchFrameDecoder};
use serde_json::{json, Value};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends for a protobuf client.
const PROTOBUF_FIRST: &str = "application/vnd.kubernetes.protobuf,application/json";
const STEP: Duration = Duration::from_secs(10);

/// One request on a new connection; the response with its body still streaming.
async fn send(
    sim: &Sim,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> http::Response<Incoming> {
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder().method(method).uri(path).header("Host", "sim");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match body {
        Some(v) => Bytes::from(serde_json::to_vec(&v).expect("json")),
        None => Bytes::new(),
    };
    let req = req.body(Full::new(body)).expect("request");
    tokio::time::timeout(STEP, sender.send_request(req)).await.expect("in time").expect("response")
}

/// A whole response: status and body.
async fn fetch(
    sim: &Sim,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Bytes) {
    let resp = send(sim, method, path, headers, body).await;
    let status = resp.status();
    let body = tokio::time::timeout(STEP, resp.into_body().collect())
        .await
        .expect("body in time")
        .expect("body")
        .to_bytes();
    (status, body)
}

async fn get_json(sim: &Sim, path: &str) -> Value {
    let (status, body) =
        fetch(sim, Method::GET, path, &[("Accept", "application/json")], None).await;
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("JSON")
}

/// A protobuf body's envelope and its object as JSON.
fn decode_object(body: &[u8]) -> (String, String, Value) {
    let env = decode_unknown(body).expect("envelope");
    let t = type_for(env.api_version, env.kind).expect("a known type");
    (env.api_version.into(), env.kind.into(), from_protobuf(t, env.raw).expect("decodes"))
}

/// The served node-agent kinds: (collection path, object path, apiVersion, kind, a seed object).
fn node_kinds() -> Vec<(&'static str, &'static str, &'static str, &'static str, Value)> {
    vec![
        (
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-a",
            "coordination.k8s.io/v1",
            "Lease",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "node-a", "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40,
                    "renewTime": "2026-11-22T10:00:00.123456Z"}}),
        ),
        (
            "/apis/node.k8s.io/v1/runtimeclasses",
            "/apis/node.k8s.io/v1/runtimeclasses/gvisor",
            "node.k8s.io/v1",
            "RuntimeClass",
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": "gvisor"}, "handler": "runsc",
                "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
                "scheduling": {"nodeSelector": {"sandbox": "gvisor"}}}),
        ),
        (
            "/apis/storage.k8s.io/v1/csidrivers",
            "/apis/storage.k8s.io/v1/csidrivers/csi.example.com",
            "storage.k8s.io/v1",
            "CSIDriver",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                "metadata": {"name": "csi.example.com"},
                "spec": {"attachRequired": false, "podInfoOnMount": true,
                    "volumeLifecycleModes": ["Persistent", "Ephemeral"],
                    "tokenRequests": [{"audience": "vault", "expirationSeconds": 600}]}}),
        ),
        (
            "/apis/networking.k8s.io/v1/servicecidrs",
            "/apis/networking.k8s.io/v1/servicecidrs/kubernetes",
            "networking.k8s.io/v1",
            "ServiceCIDR",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                "metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12"]}}),
        ),
    ]
}

async fn seeded() -> Sim {
    let objects = node_kinds().into_iter().map(|k| k.4);
    SimBuilder::new().seed(objects).start().await.expect("sim")
}

#[tokio::test]
async fn node_agent_kinds_are_served_in_json_and_protobuf() {
    let sim = seeded().await;
    for (collection, path, api_version, kind, seed) in node_kinds() {
        let got = get_json(&sim, path).await;
        assert_eq!(
            (got["apiVersion"].as_str(), got["kind"].as_str()),
            (Some(api_version), Some(kind))
        );
        // The Go struct's order: TypeMeta, metadata, then the kind's own fields as declared.
        let keys: Vec<&str> = got.as_object().expect("object").keys().map(String::as_str).collect();
        let expected_keys: &[&str] = match kind {
            "RuntimeClass" => {
                &["kind", "apiVersion", "metadata", "handler", "overhead", "scheduling"]
            }
            // ServiceCIDR has a status, written even when empty.
            "ServiceCIDR" => &["kind", "apiVersion", "metadata", "spec", "status"],
            _ => &["kind", "apiVersion", "metadata", "spec"],
        };
        assert_eq!(keys, expected_keys, "{kind}");
        for (field, value) in seed
            .as_object()
            .expect("seed")
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "apiVersion" | "kind"))
        {
            assert_eq!(&got[field], value, "{kind}.{field} as stored");
        }
        assert!(got.pointer("/metadata/resourceVersion").is_some(), "{kind}");

        // The same object in protobuf.
        let (status, body) =
            fetch(&sim, Method::GET, path, &[("Accept", PROTOBUF_FIRST)], None).await;
        assert_eq!(status, 200, "{kind}");
        let (av, k, object) = decode_object(&body);
        assert_eq!((av.as_str(), k.as_str()), (api_version, kind));
        assert_eq!(object, got, "{kind}: protobuf and JSON are the same object");

        // Lists, both encodings, and the list's own kind.
        let list = get_json(&sim, collection).await;
        assert_eq!(list["kind"], format!("{kind}List"));
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{kind}");
        let (status, body) =
            fetch(&sim, Method::GET, collection, &[("Accept", PROTOBUF)], None).await;
        assert_eq!(status, 200, "{kind}");
        let env = decode_unknown(&body).expect("envelope");
        assert_eq!(env.kind, format!("{kind}List"));
        let items = decode_list(&body).expect("list").items;
        let t = type_for(api_version, kind).expect("type");
        let mut item = from_protobuf(t, items[0]).expect("item");
        // List items carry no TypeMeta in protobuf; JSON items do.
        assert_eq!(item.as_object_mut().map(|o| o.len()), got.as_object().map(|o| o.len()));
        assert_eq!(item["metadata"], got["metadata"], "{kind}");

        // Field selectors: metadata.name and metadata.namespace only.
        let name = got["metadata"]["name"].as_str().expect("name");
        let by_name =
            get_json(&sim, &format!("{collection}?fieldSelector=metadata.name%3D{name}")).await;
        assert_eq!(by_name["items"].as_array().map(Vec::len), Some(1), "{kind}");
        // The same selection without a request (what the load tool compares clients with).
        let (group, resource) = resource_of(collection);
        let ns = got["metadata"]["namespace"].as_str();
        let query = format!("fieldSelector=metadata.name%3D{name}");
        let listed = sim.select(&group, &resource, ns, &query).map(|items| items.len());
        assert_eq!(listed, Ok(1), "{kind}");
        let other =
            get_json(&sim, &format!("{collection}?fieldSelector=metadata.name%3Dnope")).await;
        assert_eq!(other["items"].as_array().map(Vec::len), Some(0), "{kind}");
        let (status, body) = fetch(
            &sim,
            Method::GET,
            &format!("{collection}?fieldSelector=spec.handler%3Drunc"),
            &[("Accept", "application/json")],
            None,
        )
        .await;
        assert_eq!(status, 400, "{kind}");
        let refusal: Value = serde_json::from_slice(&body).expect("status");
        assert_eq!(
            refusal["message"],
            r#""spec.handler" is not a known field selector: only "metadata.name", "metadata.namespace""#,
            "{kind}"
        );
    }
}

/// Reads the events of a watch until `n` have come or the time is up.
async fn events(body: &mut Incoming, protobuf: bool, n: usize) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut lines = Vec::new();
    let mut frames = WatchFrameDecoder::new(1 << 20);
    while out.len() < n {
        if protobuf {
            while let Some(frame) = frames.next_frame().expect("frame") {
                let event = decode_watch_event(&frame).expect("event");
                let env = decode_unknown(event.object).expect("envelope");
                let t = type_for(env.api_version, env.kind).expect("type");
                out.push((
                    event.event_type.to_string(),
                    from_protobuf(t, env.raw).expect("object"),
                ));
            }
        } else {
            while let Some(end) = lines.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = lines.drain(..=end).collect();
                let v: Value = serde_json::from_slice(&line).expect("event line");
                out.push((v["type"].as_str().unwrap_or("").to_string(), v["object"].clone()));
            }
        }
        if out.len() >= n {
            break;
        }
        let frame = tokio::time::timeout(STEP, body.frame()).await.expect("an event in time");
        let data = frame.expect("stream open").expect("frame").into_data().unwrap_or_default();
        if protobuf {
            frames.push(&data);
        } else {
            lines.extend_from_slice(&data);
        }
    }
    out
}

#[tokio::test]
async fn watchlists_of_node_agent_kinds_send_the_state_a_bookmark_then_changes() {
    let sim = seeded().await;
    for (collection, _, api_version, kind, seed) in node_kinds() {
        for protobuf in [false, true] {
            let path = format!(
                "{collection}?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=30&watch=true"
            );
            let accept = if protobuf { PROTOBUF_FIRST } else { "application/json" };
            let resp = send(&sim, Method::GET, &path, &[("Accept", accept)], None).await;
            assert_eq!(resp.status(), 200, "{kind}");
            let content_type = resp.headers()["content-type"].to_str().unwrap_or("").to_string();
            let expected = if protobuf {
                "application/vnd.kubernetes.protobuf;stream=watch"
            } else {
                "application/json"
            };
            assert_eq!(content_type, expected, "{kind}");
            let mut body = resp.into_body();
            let initial = events(&mut body, protobuf, 2).await;
            assert_eq!(initial[0].0, "ADDED", "{kind}");
            assert_eq!(initial[0].1["metadata"]["name"], seed["metadata"]["name"], "{kind}");
            assert_eq!(initial[1].0, "BOOKMARK", "{kind}");
            assert_eq!(
                initial[1].1["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
                "{kind}"
            );
            assert_eq!(
                (initial[1].1["apiVersion"].as_str(), initial[1].1["kind"].as_str()),
                (Some(api_version), Some(kind))
            );
            // A change reaches the open watch.
            let (group, resource) = resource_of(collection);
            let ns = seed["metadata"]["namespace"].as_str().unwrap_or("");
            let name = seed["metadata"]["name"].as_str().expect("name");
            let marker = format!("{protobuf}");
            sim.modify(&group, &resource, ns, name, |v| {
                v["metadata"]["labels"] = json!({"changed": marker});
            })
            .expect("modified");
            let change = events(&mut body, protobuf, 1).await;
            assert_eq!(change[0].0, "MODIFIED", "{kind}");
            assert_eq!(change[0].1["metadata"]["labels"]["changed"], format!("{protobuf}"));
        }
    }
}

/// `(group, resource)` of a collection path.
fn resource_of(collection: &str) -> (String, String) {
    let parts: Vec<&str> = collection.trim_start_matches('/').split('/').collect();
    (parts[1].to_string(), parts[parts.len() - 1].to_string())
}

#[tokio::test]
async fn discovery_lists_the_node_agent_kinds() {
    let sim = seeded().await;
    let groups = get_json(&sim, "/apis").await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for (collection, _, api_version, kind, _) in node_kinds() {
        let (group, resource) = resource_of(collection);
        assert!(names.contains(&group.as_str()), "{group} in {names:?}");
        let list = get_json(&sim, &format!("/apis/{api_version}")).await;
        assert_eq!(list["groupVersion"], api_version);
        let entry = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == resource.as_str())
            .unwrap_or_else(|| panic!("{resource} in {list}"));
        assert_eq!(entry["kind"], kind);
        assert_eq!(entry["namespaced"], resource == "leases");
        assert_eq!(
            entry["verbs"],
            json!([
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ])
        );
    }
    let (status, body) = fetch(
        &sim,
        Method::GET,
        "/apis",
        &[("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")],
        None,
    )
    .await;
    assert_eq!(status, 200);
    let aggregated: Value = serde_json::from_slice(&body).expect("json");
    for group in ["coordination.k8s.io", "node.k8s.io", "storage.k8s.io", "networking.k8s.io"] {
        assert!(
            aggregated["items"]
                .as_array()
                .expect("items")
                .iter()
                .any(|g| g["metadata"]["name"] == group),
            "{group}"
        );
    }
}

#[tokio::test]
async fn a_kubelets_writes_are_accepted_for_its_own_objects_only() {
    let node = |i: usize| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    let sim = SimBuilder::new()
        .seed([node(1), node(2), pod])
        .auth(Auth::new().token("kubelet-n1", UserInfo::node("n1")))
        .start()
        .await
        .expect("sim");
    let as_n1 = [("Authorization", "Bearer kubelet-n1"), ("Accept", "application/json")];
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2026-11-22T10:00:00.000000Z"}});
    let (status, body) = fetch(&sim, Method::POST, leases, &as_n1, Some(lease)).await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let mut created: Value = serde_json::from_slice(&body).expect("lease");
    // The renewal: an update of the whole Lease with its resourceVersion.
    created["spec"]["renewTime"] = json!("2026-11-22T10:00:10.000000Z");
    let (status, body) =
        fetch(&sim, Method::PUT, &format!("{leases}/n1"), &as_n1, Some(created.clone())).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let renewed: Value = serde_json::from_slice(&body).expect("lease");
    assert_eq!(renewed["spec"]["renewTime"], "2026-11-22T10:00:10.000000Z");
    // A second update from the stale resourceVersion conflicts.
    let (status, _) =
        fetch(&sim, Method::PUT, &format!("{leases}/n1"), &as_n1, Some(created)).await;
    assert_eq!(status, 409);
    let merge =
        [("Authorization", "Bearer kubelet-n1"), ("Content-Type", "application/merge-patch+json")];
    let (status, _) = fetch(
        &sim,
        Method::PATCH,
        &format!("{leases}/n1"),
        &merge,
        Some(json!({"spec": {"renewTime": "2026-11-22T10:00:20.000000Z"}})),
    )
    .await;
    assert_eq!(status, 200);
    // Another node's Lease is refused.
    let (status, body) = fetch(&sim, Method::GET, &format!("{leases}/n2"), &as_n1, None).await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));

    // Node status and pod status, strategic merge patches as the kubelet sends them.
    let strategic = [
        ("Authorization", "Bearer kubelet-n1"),
        ("Content-Type", "application/strategic-merge-patch+json"),
    ];
    let (status, body) = fetch(
        &sim,
        Method::PATCH,
        "/api/v1/nodes/n1/status",
        &strategic,
        Some(json!({"status": {"conditions": [{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "lastHeartbeatTime": "2026-11-22T10:00:00Z"}]}})),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, body) = fetch(
        &sim,
        Method::PATCH,
        "/api/v1/namespaces/default/pods/p/status",
        &strategic,
        Some(json!({"status": {"phase": "Running", "podIP": "10.244.1.5",
            "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let pod = sim.get("", "pods", "default", "p").expect("pod");
    assert_eq!(pod["status"]["phase"], "Running");
    let (status, body) = fetch(
        &sim,
        Method::POST,
        "/api/v1/namespaces/default/events",
        &as_n1,
        Some(json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "p.started", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Started", "message": "Started container c", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"}})),
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    // Reads every kubelet makes, and one it may not.
    for (path, code) in [
        ("/apis/node.k8s.io/v1/runtimeclasses", 200),
        ("/apis/storage.k8s.io/v1/csidrivers", 200),
        ("/apis/networking.k8s.io/v1/servicecidrs", 403),
    ] {
        let (status, _) = fetch(&sim, Method::GET, path, &as_n1, None).await;
        assert_eq!(status.as_u16(), code, "{path}");
    }
}

/// The value of the series `name{labels}` (labels in the exposition's sorted order).
fn series(metrics: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"))
}

#[tokio::test]
async fn watch_events_and_written_bytes_are_counted_like_the_apiservers() {
    let sim = seeded().await;
    let collection = "/apis/node.k8s.io/v1/runtimeclasses";
    let (_, listed) =
        fetch(&sim, Method::GET, collection, &[("Accept", "application/json")], None).await;
    let path = format!(
        "{collection}?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=1&watch=true"
    );
    let (status, streamed) =
        fetch(&sim, Method::GET, &path, &[("Accept", "application/json")], None).await;
    assert_eq!(status, 200);
    // The watch's size is observed when it ends, a moment after its last byte.
    let labels = r#"group="node.k8s.io",resource="runtimeclasses",version="v1""#;
    let mut text = sim.metrics_text();
    for _ in 0..100 {
        if text.contains(r#"apiserver_response_sizes_count{component="apiserver",group="node.k8s.io",resource="runtimeclasses",scope="cluster",subresource="",verb="WATCH""#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        text = sim.metrics_text();
    }
    // The ADDED event and the initial-events-end BOOKMARK.
    assert_eq!(series(&text, "apiserver_watch_events_total", labels), 2.0);
    assert_eq!(series(&text, "apiserver_watch_events_sizes_sum", labels), streamed.len() as f64);
    let sizes = |verb: &str| {
        series(
            &text,
            "apiserver_response_sizes_sum",
            &format!(
                r#"component="apiserver",group="node.k8s.io",resource="runtimeclasses",scope="cluster",subresource="",verb="{verb}",version="v1""#
            ),
        )
    };
    assert_eq!(sizes("LIST"), listed.len() as f64);
    assert_eq!(sizes("WATCH"), streamed.len() as f64);
}
