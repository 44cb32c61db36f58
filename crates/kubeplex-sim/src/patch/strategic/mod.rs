//! Strategic merge patch, the way the apiserver applies it
//! (`strategicpatch.StrategicMergeMapPatch` with `MergeParallelList` and
//! `IgnoreUnmatchedNulls`, the server-side options), including the directives `kubectl apply`
//! and `kubectl patch` send:
//!
//! - `null` deletes a key;
//! - maps merge key by key; a list merges by its merge key when its Go field is tagged
//!   `patchStrategy:"merge"` (containers by `name`, ports by `containerPort`, conditions by
//!   `type`, finalizers as a set of strings...), and is replaced otherwise;
//! - `$patch: replace` on a map replaces it, `$patch: delete` empties it; in a merging list,
//!   `{"$patch": "delete", <key>: v}` removes the items with that key and
//!   `{"$patch": "replace"}` makes the rest of the patch list replace the list; `$patch: merge`
//!   is refused (500), as by the apiserver;
//! - `$retainKeys: [...]` drops the keys of the live map not listed;
//! - `$setElementOrder/<list>: [...]` orders the merged list;
//! - `$deleteFromPrimitiveList/<list>: [...]` removes those values from a merging list of
//!   scalars.
//!
//! Errors keep the apiserver's classes: malformed directives are 400, a list of lists is 422,
//! anything else the Go code returns is 500 with its message (`fmt`-formatted values included),
//! and its runtime panics are [`PatchError::ServerPanic`].

use serde_json::{Map, Value};

use super::gojson::{self, fmt_s, fmt_v, go_type, type_name, GoType};
use super::schema::{Schema, Strategy};
use super::PatchError;

mod list;
mod order;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Applies a strategic merge patch body to `target`, an object of the kind `root` describes.
pub(super) fn apply(target: &Value, body: &[u8], root: Schema) -> Result<Value, PatchError> {
    let patch = match gojson::parse(body).map_err(PatchError::BadRequest)? {
        // Decoding null into the patch map leaves it nil: nothing to merge.
        Value::Null => return Ok(target.clone()),
        Value::Object(patch) => patch,
        other => {
            return Err(PatchError::BadRequest(gojson::type_error(
                &other,
                "map[string]interface {}",
            )))
        }
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut merged = Value::Object(merge_map(original, patch, root)?);
    strip_directives(&mut merged);
    Ok(merged)
}

/// `mergeMap`.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            // The map is replaced by the patch, as written (nulls and other directives kept).
            Some("replace") => {
                patch.shift_remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    list::merge_set_element_order(&mut original, &mut patch, schema)?;

    let keys: Vec<String> = patch.keys().cloned().collect();
    for key in keys {
        let Some(patch_value) = patch.shift_remove(&key) else { continue };
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            // `$deleteFromPrimitiveList/` with nothing after keeps its own name.
            let list = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST)?;
            (if list.is_empty() { key } else { list }, true)
        } else {
            (key, false)
        };
        // A null deletes the key; unmatched nulls are dropped (IgnoreUnmatchedNulls).
        if patch_value.is_null() {
            original.shift_remove(&key);
            continue;
        }
        let Some(slot) = original.get_mut(&key) else {
            if !is_delete_list {
                if let Some(value) = new_value(patch_value) {
                    original.insert(key, value);
                }
            }
            continue;
        };
        if go_type(slot) != go_type(&patch_value) {
            if !is_delete_list {
                match new_value(patch_value) {
                    Some(value) => *slot = value,
                    None => {
                        original.shift_remove(&key);
                    }
                }
            }
            continue;
        }
        let current = std::mem::take(slot);
        let lookup = schema.lookup(&key);
        let strategy = lookup.strategy.merging();
        let merged = match (current, patch_value) {
            (Value::Object(current), Value::Object(patch_map)) => {
                if strategy == Strategy::Replace {
                    Some(Value::Object(patch_map))
                } else {
                    Some(Value::Object(merge_map(current, patch_map, lookup.schema)?))
                }
            }
            (Value::Array(current), Value::Array(patch_items)) => {
                // Delete lists merge whatever the field's strategy.
                if strategy == Strategy::Merge || is_delete_list {
                    let items = list::merge_slice(current, patch_items, lookup, is_delete_list)?;
                    Some(Value::Array(items))
                } else {
                    Some(Value::Array(patch_items))
                }
            }
            (_, scalar) => remove_directives(scalar),
        };
        match merged {
            Some(value) => {
                if let Some(slot) = original.get_mut(&key) {
                    *slot = value;
                }
            }
            None => {
                original.shift_remove(&key);
            }
        }
    }
    Ok(original)
}

/// A patch value taking a key the live object lacks (or holds with another type): nulls
/// discarded, `$patch` maps dropped. None when the value itself is such a map.
fn new_value(mut value: Value) -> Option<Value> {
    discard_nulls(&mut value);
    remove_directives(value)
}

/// `applyRetainKeysDirective`: every non-null patch key must be listed (400 otherwise), and
/// the live keys not listed are dropped.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS) else { return Ok(()) };
    let Value::Array(retain) = retain else {
        return Err(bad_request("invalid patch format of retainKeys"));
    };
    // Go builds a set of the listed values: a map or list in it cannot be hashed.
    if retain.iter().any(|v| matches!(v, Value::Object(_) | Value::Array(_))) {
        return Err(unhashable(&retain));
    }
    let listed = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !listed(key) {
            return Err(bad_request("invalid patch format of retainKeys"));
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `extractKey`: the list name after `<prefix>/`.
fn extract_key(key: &str, prefix: &str) -> Result<String, PatchError> {
    match key.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_owned()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => {
            Err(bad_request("invalid patch format of primitive list"))
        }
        _ => Err(bad_request("invalid patch format of setElementOrder list")),
    }
}

/// `removeDirectives`: drops maps carrying `$patch` (and the keys or items holding them).
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter().filter_map(|(k, v)| remove_directives(v).map(|v| (k, v))).collect(),
        )),
        Value::Array(items) => {
            Some(Value::Array(items.into_iter().filter_map(remove_directives).collect()))
        }
        other => Some(other),
    }
}

/// `discardNullValuesFromPatch`: null members go, null list items stay.
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Removes the directive keys the algorithm can leave behind (in values it takes as written):
/// decoding into the Go type drops them, having no field of that name.
fn strip_directives(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| {
                k != DIRECTIVE
                    && k != RETAIN_KEYS
                    && !k.starts_with(&format!("{SET_ELEMENT_ORDER}/"))
                    && !k.starts_with(&format!("{DELETE_FROM_PRIMITIVE_LIST}/"))
            });
            map.values_mut().for_each(strip_directives);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

fn bad_request(message: &str) -> PatchError {
    PatchError::BadRequest(message.to_owned())
}

/// `mergepatch.ErrBadPatchType`.
fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> PatchError {
    PatchError::Internal(format!(
        "unknown patch type: {} in map: {}",
        fmt_s(directive),
        fmt_v(&Value::Object(map.clone()))
    ))
}

/// `mergepatch.ErrBadArgType(expected, actual)`.
fn bad_arg_type(expected: GoType, actual: &Value) -> PatchError {
    let expected = match expected {
        GoType::Map => "map[string]interface {}",
        _ => "[]interface {}",
    };
    PatchError::Internal(format!("expected a {expected}, but received a {}", type_name(actual)))
}

/// `mergepatch.ErrNoMergeKey`.
fn no_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::Internal(format!(
        "map: {} does not contain declared merge key: {key}",
        fmt_v(&Value::Object(map.clone()))
    ))
}

/// Go panics when a map or slice is used as a map key.
fn unhashable(values: &[Value]) -> PatchError {
    let ty = values
        .iter()
        .find(|v| matches!(v, Value::Object(_) | Value::Array(_)))
        .map(type_name)
        .unwrap_or_default();
    PatchError::ServerPanic(format!("runtime error: hash of unhashable type {ty}"))
}

fn panic(message: &str) -> PatchError {
    PatchError::ServerPanic(message.to_owned())
}

#[cfg(test)]
mod tests;
