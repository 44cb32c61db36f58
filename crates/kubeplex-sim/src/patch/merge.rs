//! JSON merge patch (RFC 7386) as the apiserver applies it with
//! `gopkg.in/evanphx/json-patch.v4` `MergePatch`:
//!
//! - a body that is not JSON, `null`, or a scalar is 400 "Invalid JSON Patch";
//! - an object merges into the target: `null` members delete, objects merge recursively,
//!   everything else (arrays included) replaces; nulls inside a value that replaces are pruned
//!   from its objects, also from objects nested in arrays (null array elements stay), except
//!   when an array replaces an object member;
//! - an array body replaces the whole document (the apiserver then fails to decode it into the
//!   kind; the caller's validation answers that).

use serde_json::{Map, Value};

use super::{gojson, PatchError};

/// Applies an RFC 7386 merge patch body to `target`.
pub fn apply(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let invalid = || PatchError::BadRequest("Invalid JSON Patch".to_owned());
    match gojson::parse(body).map_err(|_| invalid())? {
        Value::Object(patch) => match target {
            Value::Object(doc) => {
                let mut doc = doc.clone();
                merge_docs(&mut doc, patch);
                Ok(Value::Object(doc))
            }
            // A target that is not an object is replaced by the patch, nulls pruned.
            _ => {
                let mut patch = Value::Object(patch);
                prune_nulls(&mut patch);
                Ok(patch)
            }
        },
        Value::Array(mut items) => {
            prune_array_nulls(&mut items);
            Ok(Value::Array(items))
        }
        _ => Err(invalid()),
    }
}

fn merge_docs(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (key, mut value) in patch {
        if value.is_null() {
            doc.shift_remove(&key);
            continue;
        }
        match doc.get_mut(&key) {
            Some(current) if !current.is_null() => {
                let current_value = std::mem::take(current);
                *current = merge(current_value, value);
            }
            _ => {
                prune_nulls(&mut value);
                doc.insert(key, value);
            }
        }
    }
}

/// Merges a patch value into an existing, non-null member.
fn merge(current: Value, mut patch: Value) -> Value {
    match (current, patch) {
        (Value::Object(mut doc), Value::Object(patch)) => {
            merge_docs(&mut doc, patch);
            Value::Object(doc)
        }
        // An object replaced by a non-object: taken as is, without pruning.
        (Value::Object(_), other) => other,
        (_, other) => {
            patch = other;
            prune_nulls(&mut patch);
            patch
        }
    }
}

fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => prune_array_nulls(items),
        _ => {}
    }
}

/// `pruneAryNulls` keeps null elements and prunes inside the others.
fn prune_array_nulls(items: &mut [Value]) {
    items.iter_mut().for_each(prune_nulls);
}

#[cfg(test)]
mod tests {
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
        let out =
            merged(cm, r#"{"metadata":{"labels":{"b":null,"d":"4"}},"data":{"k":"w"}}"#).unwrap();
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
}
