//! JSON patch: RFC 6902 appendix A, and evanphx v4's departures from it.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

fn patched(target: Value, patch: &str) -> Result<Value, PatchError> {
    apply(&target, patch.as_bytes())
}

fn rejected(target: Value, patch: &str) -> String {
    match patched(target, patch) {
        Err(PatchError::Rejected(cause)) => cause,
        other => panic!("expected a 422, got {other:?}"),
    }
}

#[test]
fn rfc6902_appendix_a() {
    let ok = [
        (
            json!({"foo":"bar"}),
            r#"[{"op":"add","path":"/baz","value":"qux"}]"#,
            json!({"foo":"bar","baz":"qux"}),
        ),
        (
            json!({"foo":["bar","baz"]}),
            r#"[{"op":"add","path":"/foo/1","value":"qux"}]"#,
            json!({"foo":["bar","qux","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            r#"[{"op":"remove","path":"/baz"}]"#,
            json!({"foo":"bar"}),
        ),
        (
            json!({"foo":["bar","qux","baz"]}),
            r#"[{"op":"remove","path":"/foo/1"}]"#,
            json!({"foo":["bar","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            r#"[{"op":"replace","path":"/baz","value":"boo"}]"#,
            json!({"baz":"boo","foo":"bar"}),
        ),
        (
            json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
            r#"[{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]"#,
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
        ),
        (
            json!({"foo":["all","grass","cows","eat"]}),
            r#"[{"op":"move","from":"/foo/1","path":"/foo/3"}]"#,
            json!({"foo":["all","cows","eat","grass"]}),
        ),
        (
            json!({"baz":"qux","foo":["a",2,"c"]}),
            r#"[{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]"#,
            json!({"baz":"qux","foo":["a",2,"c"]}),
        ),
        (
            json!({"foo":"bar"}),
            r#"[{"op":"add","path":"/child","value":{"grandchild":{}}}]"#,
            json!({"foo":"bar","child":{"grandchild":{}}}),
        ),
        (
            json!({"foo":"bar"}),
            r#"[{"op":"add","path":"/baz","value":"qux","xyz":123}]"#,
            json!({"foo":"bar","baz":"qux"}),
        ),
        (
            json!({"/":9,"~1":10}),
            r#"[{"op":"test","path":"/~01","value":10}]"#,
            json!({"/":9,"~1":10}),
        ),
        (
            json!({"foo":["bar"]}),
            r#"[{"op":"add","path":"/foo/-","value":["abc","def"]}]"#,
            json!({"foo":["bar",["abc","def"]]}),
        ),
        (
            json!({"a":{"b":1}}),
            r#"[{"op":"copy","from":"/a","path":"/c"}]"#,
            json!({"a":{"b":1},"c":{"b":1}}),
        ),
    ];
    for (target, patch, expected) in ok {
        assert_eq!(patched(target, patch).unwrap(), expected, "{patch}");
    }
    assert_eq!(
        rejected(json!({"baz":"qux"}), r#"[{"op":"test","path":"/baz","value":"bar"}]"#),
        "testing value /baz failed: test failed"
    );
    assert_eq!(
        rejected(json!({"foo":"bar"}), r#"[{"op":"add","path":"/baz/bat","value":"qux"}]"#),
        "add operation does not apply: doc is missing path: \"/baz/bat\": missing value"
    );
    // A.13: the duplicate "op" is not detected; the last one wins.
    assert_eq!(
        rejected(
            json!({"foo":"bar"}),
            r#"[{"op":"add","path":"/baz","value":"qux","op":"remove"}]"#
        ),
        "error in remove for path: '/baz': Unable to remove nonexistent key: baz: missing value"
    );
    assert_eq!(
        rejected(json!({"/":9,"~1":10}), r#"[{"op":"test","path":"/~01","value":"10"}]"#),
        "testing value /~01 failed: test failed"
    );
}

#[test]
fn evanphx_v4_quirks() {
    // Negative indices count from the end; for add, -1 is after the last element.
    assert_eq!(
        patched(json!({"a":[1,2,3]}), r#"[{"op":"remove","path":"/a/-1"}]"#).unwrap(),
        json!({"a":[1,2]})
    );
    assert_eq!(
        patched(json!({"a":[1,2]}), r#"[{"op":"add","path":"/a/-1","value":9}]"#).unwrap(),
        json!({"a":[1,2,9]})
    );
    assert_eq!(
        patched(json!({"a":[1,2]}), r#"[{"op":"replace","path":"/a/-2","value":0}]"#).unwrap(),
        json!({"a":[0,2]})
    );
    // Replacing a missing object key adds it.
    assert_eq!(
        patched(json!({"a":1}), r#"[{"op":"replace","path":"/b","value":2}]"#).unwrap(),
        json!({"a":1,"b":2})
    );
    // Without a leading slash the last segment is a child of the root.
    assert_eq!(
        patched(json!({"a":1}), r#"[{"op":"add","path":"x/b","value":2}]"#).unwrap(),
        json!({"a":1,"b":2})
    );
    // A missing or null member passes a test for null or for nothing.
    assert_eq!(
        patched(
            json!({"a":null}),
            r#"[{"op":"test","path":"/b"},{"op":"test","path":"/a","value":null}]"#
        )
        .unwrap(),
        json!({"a":null})
    );
    // Copying a missing key copies null; an op without value writes null.
    assert_eq!(
        patched(
            json!({"a":1}),
            r#"[{"op":"copy","from":"/x","path":"/y"},{"op":"add","path":"/z"}]"#
        )
        .unwrap(),
        json!({"a":1,"y":null,"z":null})
    );
    // The root can be replaced (by an object or array), not added to.
    assert_eq!(
        patched(json!({"a":1}), r#"[{"op":"replace","path":"","value":{"b":2}}]"#).unwrap(),
        json!({"b":2})
    );
    assert_eq!(
        rejected(json!({"a":1}), r#"[{"op":"add","path":"","value":{}}]"#),
        "add operation does not apply: doc is missing path: \"\": missing value"
    );
    assert_eq!(
        rejected(json!({"a":1}), r#"[{"op":"replace","path":"","value":3}]"#),
        "replace operation value must be object or array: %!w(<nil>)"
    );
    assert_eq!(
        rejected(json!({"a":[1]}), r#"[{"op":"add","path":"/a/2","value":0}]"#),
        "error in add for path: '/a/2': Unable to access invalid index: 2: invalid index referenced"
    );
    assert_eq!(
        rejected(json!({"a":[1]}), r#"[{"op":"add","path":"/a/x","value":0}]"#),
        "error in add for path: '/a/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax"
    );
    assert_eq!(
        rejected(json!({"a":[1]}), r#"[{"op":"replace","path":"/a/5","value":0}]"#),
        "replace operation does not apply: doc is missing key: /a/5: missing value"
    );
    assert_eq!(rejected(json!({}), r#"[{"op":"frob","path":"/a"}]"#), "Unexpected kind: frob");
    assert_eq!(rejected(json!({}), "[null]"), "Unexpected kind: unknown");
    assert_eq!(
        rejected(json!({}), r#"[{"op":"replace","path":3}]"#),
        "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string"
    );
    assert_eq!(
        rejected(json!({"a":1}), r#"[{"op":"move","from":"/b","path":"/c"}]"#),
        "error in move for path: 'b': Unable to remove nonexistent key: b: missing value"
    );
    // A failed operation leaves nothing applied.
    assert!(patched(
        json!({"a":1}),
        r#"[{"op":"add","path":"/b","value":1},{"op":"test","path":"/a","value":2}]"#
    )
    .is_err());
}

#[test]
fn go_panics_become_500() {
    let panics = [
        (json!({"a":1}), r#"[{"op":"replace","path":""}]"#),
        (json!({"a":1}), r#"[{"op":"test","path":""}]"#),
        (json!({"a":[null]}), r#"[{"op":"test","path":"/a","value":[1]}]"#),
    ];
    for (target, patch) in panics {
        let err = patched(target, patch).unwrap_err();
        assert!(matches!(err, PatchError::ServerPanic(_)), "{patch}: {err:?}");
        assert_eq!(err.code(), 500);
    }
}

#[test]
fn body_errors_are_400_with_the_decoder_message() {
    let cases = [
        ("{", "unexpected end of JSON input"),
        (r#"{"op":"add"}"#, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        (
            r#"[{"op":"add"},"x"]"#,
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation",
        ),
        ("[1,}", "invalid character '}' looking for beginning of value"),
    ];
    for (body, message) in cases {
        assert_eq!(
            patched(json!({}), body),
            Err(PatchError::BadRequest(message.to_owned())),
            "{body}"
        );
    }
    // null is an empty patch.
    assert_eq!(patched(json!({"a":1}), "null").unwrap(), json!({"a":1}));
}

#[test]
fn operation_limit_is_413() {
    let op = r#"{"op":"test","path":"/a","value":1}"#;
    let within = format!("[{}]", vec![op; MAX_JSON_PATCH_OPERATIONS].join(","));
    assert!(patched(json!({"a":1}), &within).is_ok());
    let over = format!("[{}]", vec![op; MAX_JSON_PATCH_OPERATIONS + 1].join(","));
    let err = patched(json!({"a":1}), &over).unwrap_err();
    assert_eq!(err, PatchError::TooManyOperations(10_001));
    assert_eq!(
        err.message(),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
}

#[test]
fn copies_are_limited_to_3_mib() {
    let big = "x".repeat(1024 * 1024);
    let ops: Vec<String> =
        (0..4).map(|i| format!(r#"{{"op":"copy","from":"/big","path":"/c{i}"}}"#)).collect();
    let err = patched(json!({ "big": big }), &format!("[{}]", ops.join(","))).unwrap_err();
    assert!(
        matches!(err, PatchError::Rejected(ref m) if m.starts_with("Unable to complete the copy"))
    );
    assert!(patched(json!({ "big": big }), &format!("[{}]", ops[..2].join(","))).is_ok());
}

#[test]
fn kubectl_patch_json_on_a_pod() {
    let pod = json!({"metadata":{"name":"p","labels":{"app":"web"}},
        "spec":{"containers":[{"name":"app","image":"nginx:1.25"}]}});
    let patch = r#"[{"op":"test","path":"/spec/containers/0/name","value":"app"},
        {"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
        {"op":"add","path":"/metadata/labels/tier","value":"front"},
        {"op":"remove","path":"/metadata/labels/app"}]"#;
    assert_eq!(
        serde_json::to_string(&patched(pod, patch).unwrap()).unwrap(),
        r#"{"metadata":{"name":"p","labels":{"tier":"front"}},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}"#
    );
}

proptest! {
    #[test]
    fn never_panics(body in r#"\[(\{"op":"(add|remove|replace|move|copy|test)","(path|from)":"(/[a-z0-9~-]{0,3}){0,3}"(,"value":(null|1|\[\]|\{\}))?\},?){0,4}\]"#) {
        let _ = patched(json!({"a":[1,{"b":null}],"c":{"d":[]}}), &body);
    }

    #[test]
    fn add_then_remove_restores(key in "[a-z]{1,6}", value in any::<i64>()) {
        let target = json!({"keep":1});
        prop_assume!(key != "keep");
        let patch = json!([
            {"op":"add","path":format!("/{key}"),"value":value},
            {"op":"remove","path":format!("/{key}")}
        ]);
        prop_assert_eq!(patched(target.clone(), &patch.to_string()).unwrap(), target);
    }
}
