//! Lenient field access on stored objects. A missing or mistyped field reads as Go's zero
//! value, which is what the printers see for an unset field of a decoded struct.

use serde_json::Value;

/// The value at `path`, if every step is an object key.
pub(super) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(key))
}

/// A string field; "" when absent or not a string.
pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or_default()
}

/// An array field; empty when absent or not an array.
pub(super) fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// An integer field; 0 when absent or not an integer.
pub(super) fn int_at(v: &Value, path: &[&str]) -> i64 {
    at(v, path).and_then(Value::as_i64).unwrap_or_default()
}

/// A boolean field; false when absent or not a boolean.
pub(super) fn bool_at(v: &Value, path: &[&str]) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or_default()
}

/// Whether a Go pointer-to-struct field is non-nil: present and not `null`.
pub(super) fn present<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    at(v, path).filter(|x| !x.is_null())
}

/// The number of entries of a map field (`len(map)` in Go).
pub(super) fn map_len(v: &Value, path: &[&str]) -> usize {
    at(v, path).and_then(Value::as_object).map_or(0, |m| m.len())
}
