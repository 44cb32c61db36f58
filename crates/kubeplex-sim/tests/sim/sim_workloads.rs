//! apps/v1 deployments and replicasets in the fake apiserver, as kube-apiserver 1.36's registry
//! stores them: defaults on every write, status dropped on create and kept by updates of the
//! main resource, `metadata.generation` bumped by spec (and, for deployments, annotation)
//! changes, strategic merge patches keyed by container name, protobuf, and `scale` not served.

use crate::support;

use http::Method;
use kubeplex_sim::SimBuilder;
use serde_json::{json, Value};
use support::*;

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const REPLICASETS: &str = "/apis/apps/v1/namespaces/default/replicasets";

fn workload(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "annotations": {"note": "a"}},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "app:1", "args": ["-v"]}]}}},
        "status": {"replicas": 5, "readyReplicas": 5}})
}

async fn put(addr: &str, path: &str, v: &Value) -> Value {
    let resp = send_json(addr, Method::PUT, path, v).await;
    assert_eq!(resp.status, 200, "PUT {path}: {}", String::from_utf8_lossy(&resp.body));
    resp.json()
}

#[tokio::test]
async fn deployments_are_defaulted_and_generations_follow_the_registry() {
    let sim = SimBuilder::new().start().await.expect("sim starts");
    let addr = sim.addr().to_string();
    let created = send_json(&addr, Method::POST, DEPLOYMENTS, &workload("Deployment", "d")).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let d = created.json();
    assert_eq!(d["metadata"]["generation"], 1);
    // SetDefaults_Deployment, in DeploymentSpec's field order; the client's status is dropped.
    assert_eq!(
        serde_json::to_string(&d["spec"]).unwrap(),
        concat!(
            r#"{"replicas":1,"selector":{"matchLabels":{"app":"d"}},"#,
            r#""template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"app:1","args":["-v"],"resources":{}}]}},"#,
            r#""strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},"#,
            r#""revisionHistoryLimit":10,"progressDeadlineSeconds":600}"#
        )
    );
    assert_eq!(d["status"], json!({}));

    let path = format!("{DEPLOYMENTS}/d");
    // A spec change bumps the generation; a PUT that drops `replicas` gets the default back.
    let mut next = d.clone();
    next["spec"]["replicas"] = json!(3);
    let d = put(&addr, &path, &next).await;
    assert_eq!(
        (d["metadata"]["generation"].clone(), d["spec"]["replicas"].clone()),
        (json!(2), json!(3))
    );
    let mut next = d.clone();
    next["spec"].as_object_mut().unwrap().remove("replicas");
    let d = put(&addr, &path, &next).await;
    assert_eq!(
        (d["metadata"]["generation"].clone(), d["spec"]["replicas"].clone()),
        (json!(3), json!(1))
    );
    // Deployments also count annotation changes (the controller copies them to replicasets).
    let mut next = d.clone();
    next["metadata"]["annotations"]["note"] = json!("b");
    let d = put(&addr, &path, &next).await;
    assert_eq!(d["metadata"]["generation"], 4);
    // Status goes through /status only, and does not bump the generation.
    let mut next = d.clone();
    next["status"] = json!({"replicas": 1, "readyReplicas": 1, "observedGeneration": 4});
    let d = put(&addr, &path, &next).await;
    assert_eq!((d["status"].clone(), d["metadata"]["generation"].clone()), (json!({}), json!(4)));
    let mut next = d.clone();
    next["status"] = json!({"replicas": 1, "readyReplicas": 1, "observedGeneration": 4});
    let d = put(&addr, &format!("{path}/status"), &next).await;
    assert_eq!(d["status"], next["status"]);
    assert_eq!(d["metadata"]["generation"], 4);

    // A strategic merge patch merges containers by name.
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "app:2"}]}}}});
    let resp = request(
        &addr,
        Method::PATCH,
        &path,
        &[
            ("Accept", "application/json"),
            ("Content-Type", "application/strategic-merge-patch+json"),
        ],
        Some(serde_json::to_vec(&patch).unwrap()),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let d = resp.json();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"],
        json!([{"name": "c", "image": "app:2", "args": ["-v"], "resources": {}}])
    );
    assert_eq!(d["metadata"]["generation"], 5);

    // Protobuf carries the same object.
    let pb = get_accept(&addr, &path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(pb.header("content-type"), "application/vnd.kubernetes.protobuf");
    let env = kubeplex_wire::proto::decode_unknown(&pb.body).expect("envelope");
    let t = kubeplex_wire::codec::type_for("apps/v1", "Deployment").expect("Deployment type");
    let mut decoded = kubeplex_wire::codec::from_protobuf(t, env.raw).expect("decode");
    decoded["kind"] = json!("Deployment");
    decoded["apiVersion"] = json!("apps/v1");
    assert_eq!(norm_bytes(&decoded), norm_bytes(&get(&addr, &path).await.json()));

    // `scale` is listed by discovery but not served.
    assert_eq!(get(&addr, &format!("{path}/scale")).await.status, 404);
}

#[tokio::test]
async fn replicasets_are_defaulted_and_count_only_spec_changes() {
    let sim = SimBuilder::new().start().await.expect("sim starts");
    let addr = sim.addr().to_string();
    let created = send_json(&addr, Method::POST, REPLICASETS, &workload("ReplicaSet", "r")).await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    let rs = created.json();
    assert_eq!(rs["metadata"]["generation"], 1);
    assert_eq!(rs["spec"]["replicas"], 1);
    assert!(rs["spec"].get("strategy").is_none(), "{}", rs["spec"]);
    // ReplicaSetStatus.replicas has no omitempty.
    assert_eq!(rs["status"], json!({"replicas": 0}));
    let path = format!("{REPLICASETS}/r");
    let mut next = rs.clone();
    next["metadata"]["annotations"]["note"] = json!("b");
    let rs = put(&addr, &path, &next).await;
    assert_eq!(rs["metadata"]["generation"], 1);
    let mut next = rs.clone();
    next["spec"]["replicas"] = json!(0);
    let rs = put(&addr, &path, &next).await;
    assert_eq!(rs["metadata"]["generation"], 2);
    assert_eq!(rs["spec"]["replicas"], 0, "an explicit zero is kept");
    // The `Sim` handle writes status as a controller would.
    let rs = sim
        .modify("apps", "replicasets", "default", "r", |v| {
            v["status"] = json!({"replicas": 2, "readyReplicas": 1})
        })
        .expect("modify");
    assert_eq!(rs["status"], json!({"replicas": 2, "readyReplicas": 1}));
    assert_eq!(rs["metadata"]["generation"], 2);
}
