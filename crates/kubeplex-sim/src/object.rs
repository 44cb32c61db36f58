//! Turning a JSON value into a stored object: canonical field order, the bytes served for it in
//! each encoding, and the small views (list item, metadata only) responses are built from.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::kinds::Kind;
use super::store::{object_key, Obj};
use crate::wire::status::Status;

/// ObjectMeta fields in Go struct order (k8s.io/apimachinery meta/v1 `ObjectMeta`).
const OBJECT_META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Builds the stored form of `value`, which already carries its final metadata.
pub fn build(kind: &Kind, value: Value) -> Result<Obj, Status> {
    let value = canonicalize(kind, value)?;
    let meta = value.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("");
    let namespace = field("namespace").to_string();
    let name = field("name").to_string();
    let rv = field("resourceVersion").parse::<u64>().unwrap_or(0);
    let mut json = crate::wire::gojson::to_vec(&value);
    let mut proto = if kind.protobuf { super::codec::to_protobuf(kind, &value)? } else { None };
    let annotations = meta.and_then(|m| m.get("annotations"));
    if let Some(future) = annotations.and_then(|a| a.get(FUTURE_FIELD_ANNOTATION)) {
        if !kind.custom {
            with_future_field(future.as_str().unwrap_or(""), &mut json, proto.as_mut());
        }
    }
    Ok(Obj {
        key: object_key(&namespace, &name),
        namespace,
        name,
        rv,
        value,
        json: Bytes::from(json),
        proto: proto.map(Bytes::from),
    })
}

/// Fault injection — a newer apiserver: a built-in object annotated with this is served as an
/// apiserver whose type has a field 1.36 lacks would serve it: a last top-level member
/// `futureField` (a string, the annotation's value) in JSON, and field [`FUTURE_FIELD_NUMBER`]
/// (the same string) at the end of its protobuf message, where gogo's Marshal puts a field of
/// a higher number than the others. A proxy that renders one encoding from the other with the
/// 1.36 schema must not drop it (issue 31).
pub const FUTURE_FIELD_ANNOTATION: &str = "sim.kubeplex.dev/future-field";

/// The protobuf field number of the newer apiserver's field: above every 1.36 type's own.
pub const FUTURE_FIELD_NUMBER: u64 = 99;

fn with_future_field(value: &str, json: &mut Vec<u8>, proto: Option<&mut Vec<u8>>) {
    if json.last() == Some(&b'}') {
        json.pop();
        json.extend_from_slice(b",\"futureField\":");
        json.extend_from_slice(&crate::wire::gojson::to_vec(&Value::String(value.to_owned())));
        json.push(b'}');
    }
    if let Some(message) = proto {
        let varint = |mut n: u64, out: &mut Vec<u8>| loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        };
        varint(FUTURE_FIELD_NUMBER << 3 | 2, message);
        varint(value.len() as u64, message);
        message.extend_from_slice(value.as_bytes());
    }
}

/// The apiserver's field order: Go struct order for built-in types; sorted keys for custom
/// resources (they are unstructured maps, which Go's encoder writes sorted).
fn canonicalize(kind: &Kind, value: Value) -> Result<Value, Status> {
    if kind.custom {
        return Ok(sort_keys(value));
    }
    super::codec::canonicalize(kind, value)
}

/// Re-orders a built-in object's top level and metadata into Go struct order (TypeMeta first,
/// then ObjectMeta), leaving the rest as given.
pub fn order_type_and_meta(value: Value) -> Value {
    let Value::Object(mut obj) = value else { return value };
    let mut out = Map::new();
    for k in ["kind", "apiVersion"] {
        if let Some(v) = obj.shift_remove(k) {
            out.insert(k.to_string(), v);
        }
    }
    if let Some(Value::Object(mut meta)) = obj.shift_remove("metadata") {
        let mut ordered = Map::new();
        for k in OBJECT_META_ORDER {
            if let Some(v) = meta.shift_remove(*k) {
                ordered.insert(k.to_string(), sort_keys_shallow(k, v));
            }
        }
        out.insert("metadata".into(), Value::Object(ordered));
    }
    out.extend(obj);
    Value::Object(out)
}

fn sort_keys_shallow(field: &str, v: Value) -> Value {
    match (field, v) {
        ("labels" | "annotations", Value::Object(m)) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        (_, v) => v,
    }
}

/// Recursively sorts object keys (Go map order).
pub fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<_> = m.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// The object's JSON as `kind`'s version serves it. A custom resource read at another of its
/// versions than it was written at carries that version's apiVersion and is otherwise the same
/// (a CRD's conversion strategy `None`: the apiserver rewrites apiVersion only —
/// tests/fixtures/realcluster/custom/gadgets.v2.json). Its JSON has sorted keys (Go maps), so
/// apiVersion is its first member.
pub fn json_as(kind: &Kind, obj: &Obj) -> Bytes {
    let stored = obj.value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if !kind.custom || stored == kind.api_version {
        return obj.json.clone();
    }
    let member = |v: &str| format!("{{\"apiVersion\":{},", Value::String(v.to_string()));
    match obj.json.strip_prefix(member(stored).as_bytes()) {
        Some(rest) => {
            let mut out = member(&kind.api_version).into_bytes();
            out.extend_from_slice(rest);
            Bytes::from(out)
        }
        None => obj.json.clone(),
    }
}

/// A list item in JSON: built-in types drop kind/apiVersion inside lists (the typed list's
/// items carry no TypeMeta), custom resources keep them.
pub fn list_item_json(kind: &Kind, obj: &Obj) -> Bytes {
    if kind.custom {
        return json_as(kind, obj);
    }
    let prefix = type_meta_prefix(kind);
    match obj.json.strip_prefix(prefix.as_bytes()) {
        Some(rest) => {
            let mut out = Vec::with_capacity(rest.len() + 1);
            out.push(b'{');
            out.extend_from_slice(rest);
            Bytes::from(out)
        }
        None => obj.json.clone(),
    }
}

fn type_meta_prefix(kind: &Kind) -> String {
    format!(
        "{{\"kind\":{},\"apiVersion\":{},",
        Value::String(kind.kind.clone()),
        Value::String(kind.api_version.clone())
    )
}

/// A copy of `obj` whose resourceVersion is `rv`: the apiserver sends the previous state with
/// the event's RV when an object leaves a filtered watch.
pub fn with_resource_version(kind: &Kind, obj: &Obj, rv: u64) -> Result<Obj, Status> {
    let mut value = obj.value.clone();
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    build(kind, value)
}
