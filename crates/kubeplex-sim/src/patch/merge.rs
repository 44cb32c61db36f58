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
mod tests;
