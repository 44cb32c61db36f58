//! JSON patch (RFC 6902) as the apiserver applies it with `gopkg.in/evanphx/json-patch.v4`:
//!
//! - the body is decoded first: a syntax error, a non-array body or a non-object operation is
//!   400 with Go's decoder message; `null` is an empty patch;
//! - more than 10000 operations is 413;
//! - any operation failing is 422, whose message does not say which (the cause is kept in
//!   [`PatchError::Rejected`]).
//!
//! v4 departs from the RFC in ways clients can see, all reproduced: a path without a leading
//! `/` addresses the root's children by its last segment; `add` cannot target the root;
//! negative array indices count from the end (`-1` is the last element, and for `add` the
//! position after it); `replace` of a missing object key adds it; `copy` from a missing object
//! key copies `null`; `test` of a missing path passes when `value` is null or absent; an
//! operation without `value` writes `null`. Copies are limited to 3 MiB in total, as the
//! apiserver configures.

use serde_json::{Map, Value};

use super::gojson::{self, atoi};
use super::{PatchError, MAX_JSON_PATCH_OPERATIONS};

/// `JSONPatchMaxCopyBytes`, the apiserver's default limit on bytes added by `copy`.
const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// A failed operation, or a Go runtime panic of the library.
enum OpError {
    Failed(String),
    Panic(&'static str),
}

impl From<String> for OpError {
    fn from(message: String) -> Self {
        OpError::Failed(message)
    }
}

/// Applies an RFC 6902 patch body to `target`.
pub fn apply(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let ops = decode(body)?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(ops.len()));
    }
    let mut doc = target.clone();
    let mut copied = 0usize;
    for op in &ops {
        let done = match kind(op) {
            "add" => add(&mut doc, op),
            "remove" => remove(&mut doc, op),
            "replace" => replace(&mut doc, op),
            "move" => move_op(&mut doc, op),
            "test" => test(&mut doc, op),
            "copy" => copy(&mut doc, op, &mut copied),
            other => Err(OpError::Failed(format!("Unexpected kind: {other}"))),
        };
        match done {
            Ok(()) => {}
            Err(OpError::Failed(cause)) => return Err(PatchError::Rejected(cause)),
            Err(OpError::Panic(cause)) => return Err(PatchError::ServerPanic(cause.to_owned())),
        }
    }
    Ok(doc)
}

/// `jsonpatch.DecodePatch`: an array of operations (`[]map[string]*json.RawMessage`); a null
/// element is an empty operation.
fn decode(body: &[u8]) -> Result<Vec<Map<String, Value>>, PatchError> {
    let items = match gojson::parse(body).map_err(PatchError::BadRequest)? {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => return Err(PatchError::BadRequest(gojson::type_error(&other, "jsonpatch.Patch"))),
    };
    // Go keeps decoding after a type error and reports the first one.
    if let Some(bad) = items.iter().find(|op| !matches!(op, Value::Object(_) | Value::Null)) {
        return Err(PatchError::BadRequest(gojson::type_error(bad, "jsonpatch.Operation")));
    }
    Ok(items
        .into_iter()
        .map(|op| match op {
            Value::Object(map) => map,
            _ => Map::new(),
        })
        .collect())
}

/// `Operation.Kind`: the `op` string, or "unknown".
fn kind(op: &Map<String, Value>) -> &str {
    op.get("op").and_then(Value::as_str).unwrap_or("unknown")
}

/// A string field (`path`, `from`): absent or null is "missing", any other kind a type error.
fn field<'a>(op: &'a Map<String, Value>, name: &str, missing: &str) -> Result<&'a str, String> {
    match op.get(name) {
        None | Some(Value::Null) => Err(missing.to_owned()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(gojson::type_error(other, "string")),
    }
}

fn path(op: &Map<String, Value>) -> Result<&str, String> {
    field(op, "path", "operation missing path field: missing value")
}

fn from(op: &Map<String, Value>) -> Result<&str, String> {
    field(op, "from", "operation, missing from field: missing value")
}

/// The `value` member; absent and null both write `null`, but a few checks tell them apart.
fn value(op: &Map<String, Value>) -> Option<&Value> {
    op.get("value")
}

/// RFC 6901 unescaping in one left-to-right pass, `~1` before `~0` (Go's `strings.Replacer`).
fn decode_key(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(idx) = rest.find('~') {
        out.push_str(&rest[..idx]);
        let after = &rest[idx..];
        if let Some(tail) = after.strip_prefix("~1") {
            out.push('/');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("~0") {
            out.push('~');
            rest = tail;
        } else {
            out.push('~');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    out
}

/// `findObject`: the container of the last path segment and that segment, or None when the
/// path has no `/` or a parent is missing, null or a scalar.
fn find_object<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let segments: Vec<&str> = path.split('/').collect();
    let (last, parents) = segments.split_last()?;
    let parents = parents.get(1..)?;
    let mut container = doc;
    for part in parents {
        let next = get_mut(container, &decode_key(part)).ok()??;
        if !matches!(next, Value::Object(_) | Value::Array(_)) {
            return None;
        }
        container = next;
    }
    Some((container, decode_key(last)))
}

/// An array index with v4's negative indices, checked against `len`.
fn index(key: &str, len: usize) -> Result<usize, String> {
    let idx = atoi(key)?;
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if idx < 0 { idx + len } else { idx };
    if idx < -len || resolved >= len {
        return Err(format!("Unable to access invalid index: {idx}: invalid index referenced"));
    }
    usize::try_from(resolved).map_err(|_| format!("Unable to access invalid index: {idx}"))
}

/// `container.get`: objects give None for a missing key, arrays fail on a bad index.
fn get_mut<'a>(container: &'a mut Value, key: &str) -> Result<Option<&'a mut Value>, String> {
    match container {
        Value::Object(map) => Ok(map.get_mut(key)),
        Value::Array(items) => {
            let idx = index(key, items.len())?;
            Ok(items.get_mut(idx))
        }
        _ => Ok(None),
    }
}

/// `container.add`: set an object key, or insert into an array (`-` appends).
fn insert(container: &mut Value, key: String, val: Value) -> Result<(), String> {
    match container {
        Value::Object(map) => {
            map.insert(key, val);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(val);
                return Ok(());
            }
            let idx = atoi(&key)
                .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            // Inserting allows one past the end; negative indices count from there.
            let idx = index(&idx.to_string(), items.len() + 1)?;
            items.insert(idx, val);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `container.remove`.
fn take(container: &mut Value, key: &str) -> Result<Value, String> {
    match container {
        Value::Object(map) => map
            .shift_remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
        Value::Array(items) => {
            let idx = index(key, items.len())?;
            Ok(items.remove(idx))
        }
        _ => Err(format!("Unable to remove nonexistent key: {key}: missing value")),
    }
}

fn add(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path =
        path(op).map_err(|_| "add operation failed to decode path: missing value".to_owned())?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!("add operation does not apply: doc is missing path: \"{path}\": missing value")
    })?;
    let val = value(op).cloned().unwrap_or(Value::Null);
    insert(container, key, val).map_err(|e| format!("error in add for path: '{path}': {e}"))?;
    Ok(())
}

fn remove(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path =
        path(op).map_err(|_| "remove operation failed to decode path: missing value".to_owned())?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!("remove operation does not apply: doc is missing path: \"{path}\": missing value")
    })?;
    take(container, &key).map_err(|e| format!("error in remove for path: '{path}': {e}"))?;
    Ok(())
}

fn replace(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = path(op).map_err(|e| format!("replace operation failed to decode path: {e}"))?;
    if path.is_empty() {
        // The whole document; v4 dereferences the missing value.
        let Some(val) = value(op) else {
            return Err(OpError::Panic(
                "runtime error: invalid memory address or nil pointer dereference",
            ));
        };
        if !matches!(val, Value::Object(_) | Value::Array(_)) {
            let message = "replace operation value must be object or array: %!w(<nil>)";
            return Err(OpError::Failed(message.to_owned()));
        }
        *doc = val.clone();
        return Ok(());
    }
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!("replace operation does not apply: doc is missing path: {path}: missing value")
    })?;
    let val = value(op).cloned().unwrap_or(Value::Null);
    match container {
        Value::Array(items) => {
            let idx = index(&key, items.len()).map_err(|_| {
                format!(
                    "replace operation does not apply: doc is missing key: {path}: missing value"
                )
            })?;
            if let Some(slot) = items.get_mut(idx) {
                *slot = val;
            }
        }
        // v4 never checks an object key exists: replacing a missing one adds it.
        container => {
            insert(container, key, val)?;
        }
    }
    Ok(())
}

fn move_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let from = from(op).map_err(|e| format!("move operation failed to decode from: {e}"))?;
    let (container, key) = find_object(doc, from).ok_or_else(|| {
        format!("move operation does not apply: doc is missing from path: {from}: missing value")
    })?;
    get_mut(container, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
    let val = take(container, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
    let path = path(op).map_err(|e| format!("move operation failed to decode path: {e}"))?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!(
            "move operation does not apply: doc is missing destination path: {path}: missing value"
        )
    })?;
    insert(container, key, val).map_err(|e| format!("error in move for path: '{path}': {e}"))?;
    Ok(())
}

fn test(doc: &mut Value, op: &Map<String, Value>) -> Result<(), OpError> {
    let path = path(op).map_err(|e| format!("test operation failed to decode path: {e}"))?;
    let failed = || OpError::Failed(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        let Some(expected) = value(op) else {
            return Err(OpError::Panic(
                "runtime error: invalid memory address or nil pointer dereference",
            ));
        };
        return if equal(doc, expected)? { Ok(()) } else { Err(failed()) };
    }
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!("test operation does not apply: is missing path: {path}: missing value")
    })?;
    let actual =
        get_mut(container, &key).map_err(|e| format!("error in test for path: '{path}': {e}"))?;
    match (actual.filter(|v| !v.is_null()), value(op)) {
        // A missing or null member matches an absent or null value.
        (None, None | Some(Value::Null)) => Ok(()),
        (None, Some(_)) | (Some(_), None) => Err(failed()),
        (Some(actual), Some(expected)) => {
            if equal(actual, expected)? {
                Ok(())
            } else {
                Err(failed())
            }
        }
    }
}

fn copy(doc: &mut Value, op: &Map<String, Value>, copied: &mut usize) -> Result<(), OpError> {
    let from = from(op).map_err(|e| format!("copy operation failed to decode from: {e}"))?;
    let (container, key) = find_object(doc, from).ok_or_else(|| {
        format!("copy operation does not apply: doc is missing from path: {from}: missing value")
    })?;
    let val = get_mut(container, &key)
        .map_err(|e| format!("error in copy for from: '{from}': {e}"))?
        .map(|v| v.clone())
        .unwrap_or(Value::Null);
    let path =
        path(op).map_err(|_| "copy operation failed to decode path: missing value".to_owned())?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        format!(
            "copy operation does not apply: doc is missing destination path: {path}: missing value"
        )
    })?;
    // Null members are nil nodes there, and copying nil costs nothing.
    *copied += if val.is_null() { 0 } else { marshalled_len(&val) };
    if *copied > MAX_COPY_BYTES {
        return Err(OpError::Failed(format!(
            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
        )));
    }
    insert(container, key, val)
        .map_err(|e| format!("error while adding value during copy: {e}"))?;
    Ok(())
}

/// The length of Go's `json.Marshal` output for a value: compact, with `<`, `>`, `&`, U+2028 and
/// U+2029 escaped as `\uXXXX`.
fn marshalled_len(val: &Value) -> usize {
    let text = serde_json::to_string(val).unwrap_or_default();
    let extra: usize = text
        .chars()
        .map(|c| match c {
            '<' | '>' | '&' => 5,
            '\u{2028}' | '\u{2029}' => 3,
            _ => 0,
        })
        .sum();
    text.len() + extra
}

/// `lazyNode.equal`: structural equality, where two arrays of equal length panic when a null
/// element is reached (a nil node is dereferenced).
fn equal(a: &Value, b: &Value) -> Result<bool, OpError> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (k, v) in x {
                let Some(w) = y.get(k) else { return Ok(false) };
                if v.is_null() != w.is_null() {
                    return Ok(false);
                }
                if !v.is_null() && !equal(v, w)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (v, w) in x.iter().zip(y) {
                if v.is_null() || w.is_null() {
                    return Err(OpError::Panic(
                        "runtime error: invalid memory address or nil pointer dereference",
                    ));
                }
                if !equal(v, w)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (x, y) => Ok(x == y),
    }
}

#[cfg(test)]
mod tests;
