//! The `metadata` of a row's PartialObjectMetadata, written as Go marshals a `metav1.ObjectMeta`
//! built by `meta.AsPartialObjectMetadata`: struct field order, `omitempty` rules, and map keys
//! sorted. For built-in kinds this equals the stored bytes; custom resources are stored
//! unstructured with sorted keys, so their metadata must be reordered here.

use serde_json::{Map, Value};

use crate::gojson::{push_string, write_sorted_map, write_value};

/// How Go decides whether an `omitempty` field is written.
#[derive(Clone, Copy)]
enum Omit {
    /// A string, number or slice: omitted when zero or empty.
    Empty,
    /// A pointer (or `omitzero` time): omitted only when nil.
    Nil,
    /// Not omitempty: always written, `""` when unset.
    Never,
}

/// How a field's value is written.
#[derive(Clone, Copy)]
enum Shape {
    AsStored,
    /// `map[string]string`: keys sorted.
    SortedMap,
    /// `[]OwnerReference`.
    OwnerRefs,
    /// `[]ManagedFieldsEntry`.
    ManagedFields,
}

type Field = (&'static str, Omit, Shape);

/// `metav1.ObjectMeta` in declaration order.
const OBJECT_META: &[Field] = &[
    ("name", Omit::Empty, Shape::AsStored),
    ("generateName", Omit::Empty, Shape::AsStored),
    ("namespace", Omit::Empty, Shape::AsStored),
    ("selfLink", Omit::Empty, Shape::AsStored),
    ("uid", Omit::Empty, Shape::AsStored),
    ("resourceVersion", Omit::Empty, Shape::AsStored),
    ("generation", Omit::Empty, Shape::AsStored),
    // `omitempty,omitzero` in 1.36: an unset creation time is left out.
    ("creationTimestamp", Omit::Nil, Shape::AsStored),
    ("deletionTimestamp", Omit::Nil, Shape::AsStored),
    ("deletionGracePeriodSeconds", Omit::Nil, Shape::AsStored),
    ("labels", Omit::Empty, Shape::SortedMap),
    ("annotations", Omit::Empty, Shape::SortedMap),
    ("ownerReferences", Omit::Empty, Shape::OwnerRefs),
    ("finalizers", Omit::Empty, Shape::AsStored),
    ("managedFields", Omit::Empty, Shape::ManagedFields),
];

const OWNER_REFERENCE: &[Field] = &[
    ("apiVersion", Omit::Never, Shape::AsStored),
    ("kind", Omit::Never, Shape::AsStored),
    ("name", Omit::Never, Shape::AsStored),
    ("uid", Omit::Never, Shape::AsStored),
    ("controller", Omit::Nil, Shape::AsStored),
    ("blockOwnerDeletion", Omit::Nil, Shape::AsStored),
];

const MANAGED_FIELDS_ENTRY: &[Field] = &[
    ("manager", Omit::Empty, Shape::AsStored),
    ("operation", Omit::Empty, Shape::AsStored),
    ("apiVersion", Omit::Empty, Shape::AsStored),
    ("time", Omit::Nil, Shape::AsStored),
    ("fieldsType", Omit::Empty, Shape::AsStored),
    // FieldsV1 is raw JSON, written back byte for byte.
    ("fieldsV1", Omit::Nil, Shape::AsStored),
    ("subresource", Omit::Empty, Shape::AsStored),
];

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// Writes `{...}` with `fields` in order, taking values from `obj`.
fn write_struct(out: &mut Vec<u8>, obj: Option<&Map<String, Value>>, fields: &[Field]) {
    out.push(b'{');
    let mut first = true;
    for &(key, omit, shape) in fields {
        let value = obj.and_then(|m| m.get(key));
        let written = match (value, omit) {
            (None | Some(Value::Null), Omit::Never) => None,
            (Some(v), Omit::Empty) if is_empty(v) => continue,
            (Some(Value::Null) | None, Omit::Nil | Omit::Empty) => continue,
            (v, _) => v,
        };
        if !first {
            out.push(b',');
        }
        first = false;
        push_string(out, key);
        out.push(b':');
        match (written, shape) {
            // A required string field that is unset.
            (None, _) => push_string(out, ""),
            (Some(Value::Object(m)), Shape::SortedMap) => write_sorted_map(m, out),
            (Some(Value::Array(items)), Shape::OwnerRefs | Shape::ManagedFields) => {
                let nested = match shape {
                    Shape::OwnerRefs => OWNER_REFERENCE,
                    _ => MANAGED_FIELDS_ENTRY,
                };
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_struct(out, item.as_object(), nested);
                }
                out.push(b']');
            }
            (Some(v), _) => write_value(v, out),
        }
    }
    out.push(b'}');
}

/// Writes a row's `object` for `includeObject=Metadata`.
pub(super) fn write_partial_object_metadata(out: &mut Vec<u8>, obj: &Value) {
    out.extend_from_slice(
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
    );
    write_struct(out, obj.get("metadata").and_then(Value::as_object), OBJECT_META);
    out.push(b'}');
}

#[cfg(test)]
mod tests;
