//! The patch entry points: content types, dispatch to the three algorithms, error responses.

use serde_json::json;

use super::*;

const PODS: (&str, &str) = ("", "pods");
const WIDGETS: (&str, &str) = ("demo.kubeplex.io", "widgets");

#[test]
fn content_types_are_matched_exactly_after_dropping_parameters() {
    assert_eq!(PatchType::from_content_type("application/json-patch+json"), Some(PatchType::Json));
    assert_eq!(
        PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
        Some(PatchType::Merge)
    );
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json"),
        Some(PatchType::StrategicMerge)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(PatchType::from_content_type("Application/JSON-patch+json"), None);
    assert_eq!(PatchType::from_content_type("application/json"), None);
    assert_eq!(PatchType::from_content_type(" application/merge-patch+json"), None);
    assert_eq!(PatchType::from_content_type(";application/merge-patch+json"), None);
    assert_eq!(PatchType::from_content_type(""), None);
}

#[test]
fn unsupported_media_types_list_what_the_route_accepts() {
    let builtin = patch_type(PODS, "application/json").unwrap_err();
    assert_eq!(builtin.code(), 415);
    assert_eq!(
        builtin.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, \
         application/strategic-merge-patch+json, application/apply-patch+yaml"
    );
    // Custom resources have no strategic merge patch.
    let custom = patch_type(WIDGETS, "application/strategic-merge-patch+json").unwrap_err();
    assert_eq!(
        custom.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    assert_eq!(patch_type(WIDGETS, "application/merge-patch+json"), Ok(PatchType::Merge));
    assert_eq!(
        patch_type(("", "pods/status"), STRATEGIC_MERGE_PATCH),
        Ok(PatchType::StrategicMerge)
    );
    assert!(supports_strategic_merge("", "nodes/status"));
    assert!(!supports_strategic_merge("demo.kubeplex.io", "widgets"));
    // And even if the caller skips the check, the patch is refused the same way.
    let err = apply_patch(WIDGETS, &json!({}), PatchType::StrategicMerge, b"{}").unwrap_err();
    assert_eq!(err, custom);
}

#[test]
fn server_side_apply_is_refused_as_by_a_server_without_it() {
    let body = b"apiVersion: v1\nkind: ConfigMap\n";
    let err = apply_patch(("", "configmaps"), &json!({}), PatchType::Apply, body).unwrap_err();
    assert_eq!(err.code(), 415);
    assert_eq!(err.reason(), "UnsupportedMediaType");
    assert_eq!(
        err.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, \
         application/strategic-merge-patch+json"
    );
    let err = apply_patch(WIDGETS, &json!({}), PatchType::Apply, body).unwrap_err();
    assert_eq!(
        err.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json"
    );
}

#[test]
fn dispatch_reaches_each_algorithm() {
    let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
    let cm_key = ("", "configmaps");
    assert_eq!(
        apply_patch(
            cm_key,
            &cm,
            PatchType::Json,
            br#"[{"op":"add","path":"/data/b","value":"2"}]"#
        )
        .unwrap(),
        json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}})
    );
    assert_eq!(
        apply_patch(cm_key, &cm, PatchType::Merge, br#"{"data":{"a":null}}"#).unwrap(),
        json!({"metadata": {"name": "c"}, "data": {}})
    );
    assert_eq!(
        apply_patch(
            cm_key,
            &cm,
            PatchType::StrategicMerge,
            br#"{"metadata":{"finalizers":["f"]}}"#
        )
        .unwrap(),
        json!({"metadata": {"name": "c", "finalizers": ["f"]}, "data": {"a": "1"}})
    );
    // A merge patch on a custom resource replaces lists (no merge keys there).
    let widget = json!({"spec": {"items": [{"name": "a"}]}});
    assert_eq!(
        apply_patch(WIDGETS, &widget, PatchType::Merge, br#"{"spec":{"items":[{"name":"b"}]}}"#)
            .unwrap(),
        json!({"spec": {"items": [{"name": "b"}]}})
    );
}

fn body(err: &PatchError) -> String {
    let (_, _, bytes) = err.response();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn responses_are_the_apiserver_status_objects() {
    let failed_test = apply_patch(
        PODS,
        &json!({"a": 1}),
        PatchType::Json,
        br#"[{"op":"test","path":"/a","value":2}]"#,
    )
    .unwrap_err();
    assert_eq!(failed_test.response().0, 422);
    assert_eq!(
        body(&failed_test),
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"the server rejected our request due to an error in our request","#,
            r#""reason":"Invalid","details":{},"code":422}"#,
            "\n"
        )
    );
    // The cause stays available for logs.
    assert_eq!(failed_test.to_string(), "testing value /a failed: test failed");

    let bad = apply_patch(PODS, &json!({}), PatchType::Merge, b"nope").unwrap_err();
    assert_eq!(
        body(&bad),
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"Invalid JSON Patch","reason":"BadRequest","code":400}"#,
            "\n"
        )
    );

    let internal = apply_patch(
        PODS,
        &json!({"spec": {"containers": [{"name": "a"}]}}),
        PatchType::StrategicMerge,
        br#"{"spec":{"containers":[{"image":"x"}]}}"#,
    )
    .unwrap_err();
    assert_eq!(
        body(&internal),
        concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"map: map[image:x] does not contain declared merge key: name","code":500}"#,
            "\n"
        )
    );

    let unsupported = patch_type(PODS, "text/plain").unwrap_err();
    assert_eq!(unsupported.response().1, "application/json");
    assert!(body(&unsupported).contains(r#""reason":"UnsupportedMediaType","code":415}"#));

    let panicked = apply_patch(PODS, &json!({}), PatchType::Json, br#"[{"op":"test","path":""}]"#)
        .unwrap_err();
    assert_eq!(
        panicked.response(),
        (
            500,
            "text/plain; charset=utf-8",
            b"This request caused apiserver to panic. Look in the logs for details.\n".to_vec()
        )
    );
}

#[test]
fn every_served_builtin_kind_has_a_merge_schema() {
    for r in super::super::discovery::builtin() {
        assert_eq!(supports_strategic_merge(r.group, r.resource), !r.custom, "{}", r.resource);
    }
}

#[test]
fn deepest_accepted_bodies_do_not_exhaust_the_stack() {
    let body = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    // A target as deep, built directly (serde_json's parser stops at 128 levels).
    let mut target = json!(0);
    for _ in 0..gojson::MAX_DEPTH {
        target = json!({ "a": target });
    }
    for patch_type in [PatchType::Merge, PatchType::StrategicMerge] {
        let patched = apply_patch(PODS, &target, patch_type, body(gojson::MAX_DEPTH).as_bytes());
        assert!(patched.is_ok(), "{patch_type:?}");
        let refused =
            apply_patch(PODS, &target, patch_type, body(gojson::MAX_DEPTH + 1).as_bytes());
        assert!(matches!(refused, Err(PatchError::BadRequest(_))), "{patch_type:?}");
    }
    // The operation array and object take two levels.
    let value = body(gojson::MAX_DEPTH - 2);
    let json_patch = format!(r#"[{{"op":"add","path":"/b","value":{value}}}]"#);
    assert!(apply_patch(PODS, &json!({}), PatchType::Json, json_patch.as_bytes()).is_ok());
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..80)) {
            let target = json!({"metadata": {"name": "a", "finalizers": ["x"]},
                "spec": {"containers": [{"name": "c"}]}});
            for patch_type in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge,
                PatchType::Apply] {
                let _ = apply_patch(PODS, &target, patch_type, &body);
            }
        }

        #[test]
        fn arbitrary_content_types_never_panic(content_type in "\\PC{0,40}") {
            let _ = patch_type(PODS, &content_type);
        }
    }
}
