//! Strategic merge patch: apimachinery's own raw test cases, and what kubectl sends.

use serde_json::{json, Value};

use super::super::schema::{root, FieldMeta, FieldShape, Schema, Strategy};
use super::super::PatchError;
use super::apply;

mod gocases;

/// apimachinery's test struct `MergeItem` (patch_test.go), as a schema table.
const MERGE_ITEM: &[(&str, &[FieldMeta])] = &[
    (
        "MergeItem",
        &[
            list("mergingList", "MergeItem", Strategy::Merge, "name"),
            list("nonMergingList", "MergeItem", Strategy::None, ""),
            list("mergingIntList", "", Strategy::Merge, ""),
            FieldMeta {
                json: "mergeItemPtr",
                shape: FieldShape::Struct,
                ty: "MergeItem",
                strategy: Strategy::Merge,
                merge_key: "name",
            },
            FieldMeta {
                json: "replacingItem",
                shape: FieldShape::Struct,
                ty: "",
                strategy: Strategy::Replace,
                merge_key: "",
            },
            FieldMeta {
                json: "retainKeysMap",
                shape: FieldShape::Struct,
                ty: "RetainKeysMergeItem",
                strategy: Strategy::None, // patchStrategy:"retainKeys"
                merge_key: "",
            },
            list("retainKeysMergingList", "MergeItem", Strategy::MergeRetainKeys, "name"),
        ],
    ),
    (
        "RetainKeysMergeItem",
        &[
            list("mergingIntList", "", Strategy::Merge, ""),
            list("mergingList", "MergeItem", Strategy::Merge, "name"),
            list("nonMergingList", "MergeItem", Strategy::None, ""),
        ],
    ),
];

const fn list(
    json: &'static str,
    ty: &'static str,
    strategy: Strategy,
    merge_key: &'static str,
) -> FieldMeta {
    FieldMeta { json, shape: FieldShape::List, ty, strategy, merge_key }
}

#[test]
fn apimachinery_raw_test_cases() {
    let schema = Schema::of(MERGE_ITEM, "MergeItem");
    let mut failures = Vec::new();
    for (description, original, patch, expected, error) in gocases::CASES {
        let original: Value = serde_json::from_str(original).expect("case JSON");
        let result = apply(&original, patch.as_bytes(), schema);
        match (result, expected) {
            (Ok(got), Some(expected)) if error.is_empty() => {
                let expected: Value = serde_json::from_str(expected).expect("case JSON");
                if got != expected {
                    failures
                        .push(format!("{description}:\n  got      {got}\n  expected {expected}"));
                }
            }
            (Err(err), _) if !error.is_empty() => {
                if !err.to_string().contains(error) {
                    failures.push(format!("{description}: error {err:?}, expected {error:?}"));
                }
            }
            (got, _) => failures
                .push(format!("{description}: got {got:?}, expected {expected:?} / {error:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        gocases::CASES.len(),
        failures.join("\n")
    );
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"},
            "finalizers": ["a.example/f", "b.example/f"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u-1"}
            ]
        },
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx:1.25",
                 "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "sidecar", "image": "busybox"}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists"}]
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False"}
            ]
        }
    })
}

fn smp(target: &Value, patch: &str) -> Result<Value, PatchError> {
    apply(target, patch.as_bytes(), root("", "pods").expect("pods are served"))
}

#[test]
fn kubectl_apply_changed_configmap() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "resourceVersion": "7",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"1\",\"b\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"cm\",\"namespace\":\"default\"}}\n"}},
        "data": {"a": "1", "b": "2"}});
    // kubectl apply after changing `a` and dropping `b` from the file.
    let patch = r#"{"data":{"a":"10","b":null},"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"a\":\"10\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"cm\",\"namespace\":\"default\"}}\n"}}}"#;
    let out = apply(&cm, patch.as_bytes(), root("", "configmaps").expect("served")).unwrap();
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        concat!(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default","resourceVersion":"7","#,
            r#""annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"a\":\"10\"},"#,
            r#"\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"cm\",\"namespace\":\"default\"}}\n"}},"#,
            r#""data":{"a":"10"}}"#
        )
    );
}

#[test]
fn kubectl_apply_changed_pod_image() {
    let patch = r#"{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"new\":1}\n"}},"spec":{"$setElementOrder/containers":[{"name":"app"},{"name":"sidecar"}],"containers":[{"image":"nginx:1.27","name":"app"}]}}"#;
    let out = smp(&pod(), patch).unwrap();
    let mut expected = pod();
    expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!("{\"new\":1}\n");
    expected["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    assert_eq!(out, expected);
    // Unchanged keys keep their place.
    assert_eq!(
        serde_json::to_string(&out["spec"]["containers"][0]).unwrap(),
        r#"{"name":"app","image":"nginx:1.27","ports":[{"containerPort":80,"protocol":"TCP"}],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}"#
    );
}

#[test]
fn kubectl_apply_reorders_adds_and_deletes_containers() {
    // The file now lists `init`-less containers: new `metrics` first, `sidecar` removed.
    let patch = r#"{"spec":{"$setElementOrder/containers":[{"name":"metrics"},{"name":"app"}],
        "containers":[{"image":"prom","name":"metrics"},{"$patch":"delete","name":"sidecar"}]}}"#;
    let out = smp(&pod(), patch).unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["metrics", "app"]);
    assert_eq!(out["spec"]["containers"][0], json!({"image": "prom", "name": "metrics"}));
}

#[test]
fn nested_lists_merge_by_their_keys() {
    let patch = r#"{"spec":{"containers":[{"name":"app",
        "$setElementOrder/env":[{"name":"C"},{"name":"A"},{"name":"B"}],
        "env":[{"name":"C","value":"3"},{"name":"A","value":"one"}],
        "ports":[{"containerPort":443,"protocol":"TCP"}]}]}}"#;
    let out = smp(&pod(), patch).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "C", "value": "3"}, {"name": "A", "value": "one"}, {"name": "B", "value": "2"}])
    );
    // A port merges by containerPort: the new one goes first, as Go orders patch items without
    // a position in the live list.
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 443, "protocol": "TCP"}, {"containerPort": 80, "protocol": "TCP"}])
    );
    // No directive key survives.
    assert!(!out.to_string().contains("$setElementOrder"));
}

#[test]
fn null_deletes_and_lists_without_strategy_are_replaced() {
    let patch = r#"{"metadata":{"labels":{"tier":null,"new":"x"}},
        "spec":{"tolerations":[{"key":"other","operator":"Exists"}]}}"#;
    let out = smp(&pod(), patch).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web", "new": "x"}));
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "other", "operator": "Exists"}]));
    // Deleting a whole field.
    let out = smp(&pod(), r#"{"spec":{"tolerations":null},"status":null}"#).unwrap();
    assert!(out["spec"].get("tolerations").is_none());
    assert!(out.get("status").is_none());
}

#[test]
fn metadata_lists() {
    // Finalizers merge as a set of strings; deleting uses the parallel list.
    let out = smp(&pod(), r#"{"metadata":{"finalizers":["c.example/f","a.example/f"]}}"#).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["c.example/f", "a.example/f", "b.example/f"]));
    let out =
        smp(&pod(), r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a.example/f"]}}"#)
            .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b.example/f"]));
    // Owner references merge by uid.
    let out = smp(
        &pod(),
        r#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"u-2"},
            {"uid":"u-1","controller":true}]}}"#,
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u-2"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u-1", "controller": true}
        ])
    );
}

#[test]
fn kubelet_status_patch_merges_conditions() {
    let patch = r#"{"status":{"$setElementOrder/conditions":[{"type":"Initialized"},{"type":"Ready"}],
        "conditions":[{"status":"True","type":"Ready"}],"podIP":"10.0.0.5"}}"#;
    let out = smp(&pod(), patch).unwrap();
    assert_eq!(
        out["status"],
        json!({"phase": "Running", "conditions": [
            {"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}
        ], "podIP": "10.0.0.5"})
    );
}

#[test]
fn map_directives() {
    let out = smp(&pod(), r#"{"metadata":{"labels":{"$patch":"replace","only":"this"}}}"#).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"only": "this"}));
    let out = smp(&pod(), r#"{"metadata":{"labels":{"$patch":"delete"}}}"#).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({}));
    // A list item replacing the whole list.
    let out = smp(
        &pod(),
        r#"{"spec":{"containers":[{"name":"solo","image":"x"},{"$patch":"replace"}]}}"#,
    )
    .unwrap();
    assert_eq!(out["spec"]["containers"], json!([{"name": "solo", "image": "x"}]));
    // $retainKeys drops what it does not list (kubectl sends it for volumes).
    let out = smp(
        &pod(),
        r#"{"spec":{"volumes":[{"$retainKeys":["name","configMap"],"name":"data","configMap":{"name":"c"}}]}}"#,
    )
    .unwrap();
    assert_eq!(out["spec"]["volumes"], json!([{"name": "data", "configMap": {"name": "c"}}]));
}

#[test]
fn errors_keep_the_apiserver_classes_and_messages() {
    let err = |patch: &str| smp(&pod(), patch).unwrap_err();
    assert_eq!(
        err(r#"{"spec":{"containers":[{"image":"x"}]}}"#),
        PatchError::Internal("map: map[image:x] does not contain declared merge key: name".into())
    );
    assert_eq!(
        err(r#"{"metadata":{"labels":{"$patch":"merge","a":1}}}"#),
        PatchError::Internal("unknown patch type: merge in map: map[$patch:merge a:1]".into())
    );
    assert_eq!(
        err(r#"{"spec":{"containers":[{"$patch":"merge"}]}}"#),
        PatchError::Internal("merging lists cannot yet be specified in the patch".into())
    );
    assert_eq!(
        err(r#"{"spec":{"containers":[{"$patch":"remove","name":"app"}]}}"#),
        PatchError::Internal(
            "unknown patch type: remove in map: map[$patch:remove name:app]".into()
        )
    );
    assert_eq!(
        err(r#"{"metadata":{"$deleteFromPrimitiveListfinalizers":["a"]}}"#),
        PatchError::BadRequest("invalid patch format of primitive list".into())
    );
    assert_eq!(
        err(r#"{"spec":{"$setElementOrderX/containers":[]}}"#),
        PatchError::BadRequest("invalid patch format of setElementOrder list".into())
    );
    assert_eq!(
        err(r#"{"spec":{"volumes":[{"$retainKeys":["name"],"name":"data","emptyDir":{}}]}}"#),
        PatchError::BadRequest("invalid patch format of retainKeys".into())
    );
    // The first item of the live list, then of the patch list, sets the element type.
    assert_eq!(
        err(r#"{"spec":{"containers":[["a"]]}}"#),
        PatchError::Internal(
            "list element types are not identical: [[map[env:[map[name:A value:1] map[name:B value:2]] image:nginx:1.25 name:app ports:[map[containerPort:80 protocol:TCP]]] map[image:busybox name:sidecar]] [[a]]]".into()
        )
    );
    let mut empty_finalizers = pod();
    empty_finalizers["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        smp(&empty_finalizers, r#"{"metadata":{"finalizers":[["a"]]}}"#).unwrap_err(),
        PatchError::Rejected("lists of lists are not supported".into())
    );
    assert!(matches!(
        smp(&empty_finalizers, r#"{"metadata":{"finalizers":[null]}}"#).unwrap_err(),
        PatchError::ServerPanic(_)
    ));
    assert_eq!(
        err(r#"{"metadata":{"finalizers":[1]}}"#),
        PatchError::Internal(
            "list element types are not identical: [[a.example/f b.example/f] [1]]".into()
        )
    );
    assert_eq!(
        err(r#"{"spec":{"$setElementOrder/containers":{"name":"app"}}}"#),
        PatchError::Internal(
            "expected a []interface {}, but received a map[string]interface {}".into()
        )
    );
    assert_eq!(
        err(r#"{"metadata":{"finalizers":[null]}}"#),
        PatchError::Internal(
            "list element types are not identical: [[a.example/f b.example/f] [<nil>]]".into()
        )
    );
    assert!(matches!(
        err(r#"{"spec":{"containers":[{"name":{"a":1}}]}}"#),
        PatchError::ServerPanic(_)
    ));
    // Bodies that are not an object.
    assert_eq!(
        err(r#"[{"op":"add"}]"#),
        PatchError::BadRequest(
            "json: cannot unmarshal array into Go value of type map[string]interface {}".into()
        )
    );
    assert_eq!(err(r#"{"a":"#), PatchError::BadRequest("unexpected end of JSON input".into()));
    // `null` leaves the object unchanged.
    assert_eq!(smp(&pod(), "null").unwrap(), pod());
}

#[test]
fn set_element_order_must_list_the_patch_items() {
    let patch = r#"{"spec":{"$setElementOrder/containers":[{"name":"app"}],
        "containers":[{"name":"app","image":"a"},{"name":"new","image":"n"}]}}"#;
    assert_eq!(
        smp(&pod(), patch).unwrap_err(),
        PatchError::Internal(
            "The order in patch list:\n[map[image:a name:app] map[image:n name:new]]\n doesn't match $setElementOrder list:\n[map[name:app]]\n"
                .into()
        )
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_patches(body in "[\\[\\]{}:,\"$a-z/0-9 ]{0,60}") {
            let _ = smp(&pod(), &body);
        }

        #[test]
        fn never_panics_on_structured_patches(
            key in prop::sample::select(vec!["spec", "metadata", "containers", "finalizers", "$patch",
                "$retainKeys", "$setElementOrder/containers", "$deleteFromPrimitiveList/finalizers", "name"]),
            value in prop::sample::select(vec!["null", "1", "\"delete\"", "\"replace\"", "[]", "[null]",
                "[{\"name\":\"app\"}]", "{\"$patch\":\"delete\"}", "[[1]]", "{}", "[\"a\",1]"]),
            outer in prop::sample::select(vec!["spec", "metadata", "status"]),
        ) {
            let body = format!(r#"{{"{outer}":{{"{key}":{value},"containers":{value}}}}}"#);
            let _ = smp(&pod(), &body);
        }

        /// Merging an object into itself changes nothing (lists merge item by item).
        #[test]
        fn self_patch_is_identity(label in "[a-z]{1,8}", value in "[a-z0-9]{0,8}") {
            let mut target = pod();
            target["metadata"]["labels"][label.as_str()] = json!(value);
            let body = serde_json::to_string(&target).unwrap();
            prop_assert_eq!(smp(&target, &body).unwrap(), target);
        }
    }
}
