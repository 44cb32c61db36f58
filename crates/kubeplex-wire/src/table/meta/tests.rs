use super::*;
use serde_json::json;

fn partial(obj: &Value) -> String {
    let mut out = Vec::new();
    write_partial_object_metadata(&mut out, obj);
    String::from_utf8(out).unwrap_or_default()
}

#[test]
fn reorders_unstructured_metadata_like_object_meta() {
    let cr = json!({"apiVersion": "x.io/v1", "kind": "W", "metadata": {
        "uid": "u", "name": "w", "labels": {"z": "1", "a": "<"}, "generation": 1,
        "annotations": {}, "finalizers": [], "selfLink": "", "unknown": "dropped",
        "creationTimestamp": "2026-11-22T10:18:33Z", "namespace": "fx",
        "ownerReferences": [{"uid": "o", "kind": "K", "controller": true, "name": "n"}],
        "managedFields": [{"time": "2026-11-22T10:18:33Z", "manager": "m",
            "fieldsV1": {"f:b": {}, "f:a": {}}, "operation": "Update", "subresource": ""}],
        "deletionGracePeriodSeconds": 0, "deletionTimestamp": null, "resourceVersion": "5"
    }});
    assert_eq!(
        partial(&cr),
        concat!(
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"#,
            r#""name":"w","namespace":"fx","uid":"u","resourceVersion":"5","generation":1,"#,
            r#""creationTimestamp":"2026-11-22T10:18:33Z","deletionGracePeriodSeconds":0,"#,
            r#""labels":{"a":"\u003c","z":"1"},"#,
            r#""ownerReferences":[{"apiVersion":"","kind":"K","name":"n","uid":"o","controller":true}],"#,
            r#""managedFields":[{"manager":"m","operation":"Update","time":"2026-11-22T10:18:33Z","fieldsV1":{"f:b":{},"f:a":{}}}]}}"#
        )
    );
}

#[test]
fn missing_metadata_is_an_empty_object() {
    let expected =
        r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{}}"#;
    assert_eq!(partial(&json!({"kind": "ConfigMap"})), expected);
    assert_eq!(partial(&json!("not an object")), expected);
    assert_eq!(partial(&json!({"metadata": {"generation": 0, "name": ""}})), expected);
}
