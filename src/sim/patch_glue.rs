//! Applying PATCH bodies to stored objects.

use serde_json::Value;

use super::kinds::Kind;
use crate::wire::status::Status;

/// Applies a patch of the given content type to `current`.
pub fn apply(
    _kind: &Kind,
    current: &Value,
    content_type: &str,
    body: &[u8],
) -> Result<Value, Status> {
    match content_type {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))?;
            let mut target = current.clone();
            merge(&mut target, patch);
            Ok(target)
        }
        other => Err(Status::unsupported_media_type(other)),
    }
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.shift_remove(&k);
                    } else {
                        merge(t.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other,
    }
}
