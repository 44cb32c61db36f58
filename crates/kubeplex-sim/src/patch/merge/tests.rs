use serde_json::json;

use super::*;

fn merged(target: Value, patch: &str) -> Result<Value, PatchError> {
    apply(&target, patch.as_bytes())
}

/// RFC 7386 appendix A, the cases evanphx agrees on.
#[test]
fn rfc7386_examples() {
    let cases = [
        (json!({"a":"b"}), r#"{"a":"c"}"#, json!({"a":"c"})),
        (json!({"a":"b"}), r#"{"b":"c"}"#, json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), r#"{"a":null}"#, json!({})),
        (json!({"a":"b","b":"c"}), r#"{"a":null}"#, json!({"b":"c"})),
        (json!({"a":["b"]}), r#"{"a":"c"}"#, json!({"a":"c"})),
        (json!({"a":"c"}), r#"{"a":["b"]}"#, json!({"a":["b"]})),
        (json!({"a":{"b":"c"}}), r#"{"a":{"b":"d","c":null}}"#, json!({"a":{"b":"d"}})),
        (json!({"a":[{"b":"c"}]}), r#"{"a":[1]}"#, json!({"a":[1]})),
        (json!({"e":null}), r#"{"a":1}"#, json!({"e":null,"a":1})),
        (json!({}), r#"{"a":{"bb":{"ccc":null}}}"#, json!({"a":{"bb":{}}})),
    ];
    for (target, patch, expected) in cases {
        assert_eq!(merged(target, patch).unwrap(), expected, "patch {patch}");
    }
}

#[test]
fn arrays_replace_and_keep_null_elements() {
    // The RFC keeps `{"b":null}` inside the array; evanphx v4 prunes it.
    assert_eq!(
        merged(json!({"a":"b"}), r#"{"a":[null,{"b":null,"c":1}]}"#).unwrap(),
        json!({"a":[null,{"c":1}]})
    );
    // But an array replacing an object member is taken as is.
    assert_eq!(
        merged(json!({"a":{"x":1}}), r#"{"a":[{"b":null}]}"#).unwrap(),
        json!({"a":[{"b":null}]})
    );
    // A null member of the target counts as absent.
    assert_eq!(
        merged(json!({"a":null}), r#"{"a":{"b":null,"c":2}}"#).unwrap(),
        json!({"a":{"c":2}})
    );
}

#[test]
fn configmap_label_removal_keeps_order() {
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c",
        "labels":{"a":"1","b":"2","c":"3"}},"data":{"k":"v"}});
    let out = merged(cm, r#"{"metadata":{"labels":{"b":null,"d":"4"}},"data":{"k":"w"}}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"1","c":"3","d":"4"}},"data":{"k":"w"}}"#
    );
}

#[test]
fn bad_bodies_are_invalid_json_patch() {
    for body in ["", "null", "{", "\"x\"", "1", "true", "{\"a\":1}x"] {
        let err = merged(json!({}), body).unwrap_err();
        assert_eq!(err, PatchError::BadRequest("Invalid JSON Patch".to_owned()), "{body}");
        assert_eq!(err.code(), 400);
    }
}

#[test]
fn array_body_replaces_the_document() {
    assert_eq!(merged(json!({"a":1}), r#"[{"b":null},null]"#).unwrap(), json!([{}, null]));
}
