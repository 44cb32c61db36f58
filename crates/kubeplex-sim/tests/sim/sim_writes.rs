//! Writes against the fake apiserver: create, update, the patch types, delete, deletecollection,
//! and their Status errors; plus discovery as clients see it.

use crate::support;

use http::Method;
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use support::*;

async fn sim() -> Sim {
    SimBuilder::new().start().await.expect("sim")
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}})
}

async fn patch(addr: &str, path: &str, content_type: &str, body: &Value) -> Resp {
    request(
        addr,
        Method::PATCH,
        path,
        &[("Accept", "application/json"), ("Content-Type", content_type)],
        Some(serde_json::to_vec(body).expect("json")),
    )
    .await
}

#[tokio::test]
async fn create_sets_server_fields_and_refuses_duplicates() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    let r = send_json(&addr, Method::POST, CMS, &cm("a")).await;
    assert_eq!(r.status, 201);
    let o = r.json();
    assert_eq!(o["metadata"]["namespace"], "default");
    assert_eq!(o["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert_eq!(rv_of(&o), sim.current_rv());
    assert!(o["metadata"]["creationTimestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert!(o["metadata"].get("generation").is_none(), "configmaps have no generation");
    // Go struct order: kind, apiVersion, metadata, then the type's own fields.
    let keys: Vec<&String> = o.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["kind", "apiVersion", "metadata", "data"]);
    let dup = send_json(&addr, Method::POST, CMS, &cm("a")).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.json()["reason"], "AlreadyExists");
    assert_eq!(dup.json()["message"], "configmaps \"a\" already exists");
    let generated = send_json(
        &addr,
        Method::POST,
        CMS,
        &json!({"metadata": {"generateName": "gen-"}, "data": {}}),
    )
    .await;
    assert_eq!(generated.status, 201);
    let name = generated.json()["metadata"]["name"].as_str().unwrap_or("").to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    let no_ns =
        send_json(&addr, Method::POST, "/api/v1/namespaces/nope/configmaps", &cm("a")).await;
    assert_eq!(no_ns.status, 404);
    assert_eq!(no_ns.json()["message"], "namespaces \"nope\" not found");
    let unnamed = send_json(&addr, Method::POST, CMS, &json!({"data": {}})).await;
    assert_eq!(unnamed.status, 422);
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    let mut bad = cm("a");
    bad["spec"] = json!({"oops": 1});
    let r = send_json(&addr, Method::POST, &format!("{CMS}?fieldValidation=Strict"), &bad).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "strict decoding error: unknown field \"spec\"");
    let r = send_json(&addr, Method::POST, CMS, &bad).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("warning"), "299 - \"unknown field \\\"spec\\\"\"");
    assert!(r.json().get("spec").is_none(), "unknown fields are dropped");
}

#[tokio::test]
async fn patches_of_every_type() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}});
    assert_eq!(send_json(&addr, Method::POST, PODS, &pod).await.status, 201);
    // Strategic merge: containers merge by name.
    let r = patch(
        &addr,
        &format!("{PODS}/p"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"containers": [{"name": "b", "image": "b:2"}]}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let pod = r.json();
    let images: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert_eq!(images, ["a:1", "b:2"]);
    assert_eq!(pod["metadata"]["generation"], 2, "a spec change bumps generation");
    // Merge patch replaces lists.
    let r = patch(
        &addr,
        &format!("{PODS}/p"),
        "application/merge-patch+json",
        &json!({"spec": {"containers": [{"name": "c", "image": "c:1"}]}}),
    )
    .await;
    assert_eq!(r.json()["spec"]["containers"].as_array().map(Vec::len), Some(1));
    // JSON patch, and its failure.
    let r = request(
        &addr,
        Method::PATCH,
        &format!("{PODS}/p"),
        &[("Content-Type", "application/json-patch+json")],
        Some(br#"[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]"#.to_vec()),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["labels"]["x"], "y");
    let r = request(
        &addr,
        Method::PATCH,
        &format!("{PODS}/p"),
        &[("Content-Type", "application/json-patch+json")],
        Some(br#"[{"op":"test","path":"/metadata/name","value":"other"}]"#.to_vec()),
    )
    .await;
    assert_eq!(r.status, 422);
    // Custom resources take no strategic merge patch.
    let w = json!({"apiVersion": "demo.kubeplex.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}});
    let wpath = "/apis/demo.kubeplex.io/v1/namespaces/default/widgets";
    assert_eq!(send_json(&addr, Method::POST, wpath, &w).await.status, 201);
    let r = patch(
        &addr,
        &format!("{wpath}/w"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"size": 2}}),
    )
    .await;
    assert_eq!(r.status, 415);
    let r = patch(
        &addr,
        &format!("{wpath}/w"),
        "application/merge-patch+json",
        &json!({"spec": {"size": 2}}),
    )
    .await;
    assert_eq!(r.json()["spec"]["size"], 2);
    assert_eq!(
        patch(&addr, &format!("{PODS}/missing"), "application/merge-patch+json", &json!({}))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn deletes_answer_like_the_apiserver() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    let created = send_json(&addr, Method::POST, CMS, &cm("a")).await.json();
    let r = request(&addr, Method::DELETE, &format!("{CMS}/a"), &[], None).await;
    assert_eq!(r.status, 200);
    // ConfigMaps answer with a Success Status naming the object.
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": created["metadata"]["uid"]}})
    );
    assert_eq!(request(&addr, Method::DELETE, &format!("{CMS}/a"), &[], None).await.status, 404);
    // Pods answer with the deleted object.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    send_json(&addr, Method::POST, PODS, &pod).await;
    let r = request(&addr, Method::DELETE, &format!("{PODS}/p"), &[], None).await;
    assert_eq!(r.json()["kind"], "Pod");
    // A stale precondition is a conflict.
    send_json(&addr, Method::POST, CMS, &cm("b")).await;
    let body =
        serde_json::to_vec(&json!({"preconditions": {"resourceVersion": "1"}})).expect("json");
    let r = request(
        &addr,
        Method::DELETE,
        &format!("{CMS}/b"),
        &[("Content-Type", "application/json")],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 409);
    // deletecollection with a selector.
    for n in ["c1", "c2"] {
        send_json(&addr, Method::POST, CMS, &cm(n)).await;
    }
    let mut other = cm("keep");
    other["metadata"]["labels"]["app"] = json!("y");
    send_json(&addr, Method::POST, CMS, &other).await;
    let r =
        request(&addr, Method::DELETE, &format!("{CMS}?labelSelector=app%3Dx"), &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(3));
    let left = get(&addr, CMS).await.json();
    assert_eq!(left["items"].as_array().map(|i| i.len()), Some(1));
}

#[tokio::test]
async fn deleting_a_namespace_takes_its_contents() {
    let sim = sim().await;
    sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}}))
        .expect("ns");
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "gone"}})).expect("cm");
    let ns = sim.get("", "namespaces", "", "gone").expect("namespace");
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "gone");
    assert_eq!(ns["status"]["phase"], "Active");
    let r = request(&sim.addr().to_string(), Method::DELETE, "/api/v1/namespaces/gone", &[], None)
        .await;
    assert_eq!(r.status, 200);
    assert!(sim.get("", "configmaps", "gone", "a").is_none());
}

#[tokio::test]
async fn discovery_matches_the_captures_for_what_the_sim_serves() {
    let sim = sim().await;
    let addr = sim.addr().to_string();
    let r = get(&addr, "/apis/discovery.k8s.io/v1").await;
    assert_eq!(r.body.as_ref(), fixture("discovery-discovery-v1").body.as_slice());
    let core = get(&addr, "/api/v1").await.json();
    let captured = fixture("discovery-api-v1").json();
    for res in core["resources"].as_array().expect("resources") {
        let want = captured["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|c| c["name"] == res["name"]);
        assert_eq!(Some(res), want, "entry {}", res["name"]);
    }
    let api = get(&addr, "/api").await.json();
    assert_eq!(api["versions"], json!(["v1"]));
    // kubectl asks for aggregated discovery first.
    let agg = get_accept(
        &addr,
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    )
    .await;
    assert_eq!(agg.status, 200);
    assert_eq!(
        agg.header("content-type"),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let etag = agg.header("etag").to_string();
    let again = request(
        &addr,
        Method::GET,
        "/apis",
        &[
            ("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
            ("If-None-Match", &etag),
        ],
        None,
    )
    .await;
    assert_eq!(again.status, 304);
}
