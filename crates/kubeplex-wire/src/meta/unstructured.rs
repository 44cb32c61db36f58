//! Custom resources in JSON. The apiserver holds them as `Unstructured` maps, and Go writes a
//! map's keys sorted: an object is `{"apiVersion":..,"kind":..,"metadata":{"annotations":..}..}`
//! whether alone or as a list item, a list is `{"apiVersion","items","kind","metadata"}` with
//! `continue` always present in its metadata, and a bookmark has no schema-driven members.
//! PartialObjectMetadata, though, is a typed struct: its ObjectMeta comes out in struct order
//! with Go's `omitempty` rules, so the sorted metadata of a custom resource is re-ordered here.

use serde_json::value::RawValue;

use super::{partial_list, push_key, push_partial, raw_metadata, CowStr, Error, ListMeta, Members};
use crate::gojson::push_string;

/// A custom resource list body (with `\n`): keys sorted, items as cached (each a full object with
/// its `apiVersion` and `kind`), `metadata.continue` written even when empty.
pub fn list_json(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[impl AsRef<[u8]>],
) -> Vec<u8> {
    let size: usize = items.iter().map(|i| i.as_ref().len() + 1).sum();
    let mut out = Vec::with_capacity(size + 128 + meta.continue_token.len());
    out.push(b'{');
    push_key(&mut out, "apiVersion");
    push_string(&mut out, api_version);
    out.extend_from_slice(b",\"items\":[");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.as_ref());
    }
    out.extend_from_slice(b"],");
    push_key(&mut out, "kind");
    push_string(&mut out, list_kind);
    out.extend_from_slice(b",\"metadata\":{\"continue\":");
    push_string(&mut out, meta.continue_token);
    if let Some(count) = meta.remaining_item_count {
        out.extend_from_slice(b",\"remainingItemCount\":");
        out.extend_from_slice(count.to_string().as_bytes());
    }
    out.extend_from_slice(b",\"resourceVersion\":");
    push_string(&mut out, meta.resource_version);
    out.extend_from_slice(b"}}\n");
    out
}

/// The BOOKMARK object of a custom resource: the watch cache's empty `Unstructured` with the
/// kind, `metadata.resourceVersion` and possibly the initial-events-end annotation.
pub fn bookmark_json(
    api_version: &str,
    kind: &str,
    resource_version: &str,
    initial_events_end: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    out.push(b'{');
    push_key(&mut out, "apiVersion");
    push_string(&mut out, api_version);
    out.push(b',');
    push_key(&mut out, "kind");
    push_string(&mut out, kind);
    out.extend_from_slice(b",\"metadata\":{");
    if initial_events_end {
        out.extend_from_slice(b"\"annotations\":{\"k8s.io/initial-events-end\":\"true\"},");
    }
    push_key(&mut out, "resourceVersion");
    push_string(&mut out, resource_version);
    out.extend_from_slice(b"}}");
    out
}

/// A custom resource as PartialObjectMetadata (no trailing newline).
pub fn partial_object_metadata_json(object: &[u8], api_version: &str) -> Result<Vec<u8>, Error> {
    let metadata = typed_object_meta(raw_metadata(object)?)?;
    let mut out = Vec::with_capacity(metadata.len() + api_version.len() + 64);
    push_partial(&mut out, api_version, &metadata);
    Ok(out)
}

/// A custom resource's metadata as the bare protobuf message of a `meta.k8s.io/v1`
/// PartialObjectMetadata (no envelope): what `proto::partial_object_metadata` and
/// `proto::partial_object_metadata_list` write from, as they do from a built-in object's
/// message. The apiserver converts the `Unstructured` object to the typed PartialObjectMetadata
/// and encodes that; here its JSON form ([`partial_object_metadata_json`]) is encoded by the
/// codec's schema of the same type.
pub fn partial_object_metadata_message(object: &[u8]) -> Result<Vec<u8>, MessageError> {
    let json = partial_object_metadata_json(object, "meta.k8s.io/v1")?;
    let value: serde_json::Value = serde_json::from_slice(&json).map_err(Error::from)?;
    let t = crate::codec::type_for("meta.k8s.io/v1", "PartialObjectMetadata")
        .expect("the codec covers PartialObjectMetadata");
    Ok(crate::codec::to_protobuf(t, &value)?)
}

/// Why a custom resource's metadata has no protobuf form.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error(transparent)]
    Json(#[from] Error),
    #[error(transparent)]
    Codec(#[from] crate::codec::CodecError),
}

/// A PartialObjectMetadataList body (with `\n`) of custom resources.
pub fn partial_object_metadata_list_json(
    api_version: &str,
    meta: &ListMeta<'_>,
    objects: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, Error> {
    let metadata = objects
        .iter()
        .map(|o| raw_metadata(o.as_ref()).and_then(typed_object_meta))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(partial_list(api_version, meta, &metadata))
}

/// When a member is left out of the typed encoding.
#[derive(Clone, Copy)]
enum Omit {
    /// `omitempty` on a string, number, map or slice: absent, null, `""`, `0`, `{}`, `[]`.
    Empty,
    /// A pointer or `omitzero` time: absent or null.
    Null,
    /// No `omitempty`: always written, `""` when absent.
    Never,
}

/// How a member's value is written.
#[derive(Clone, Copy)]
enum Value {
    /// As it is (maps and scalars are already in Go's form).
    Raw,
    /// An array whose objects are re-ordered with these members.
    Objects(&'static [(&'static str, Omit)]),
}

const OWNER_REFERENCE: &[(&str, Omit)] = &[
    ("apiVersion", Omit::Never),
    ("kind", Omit::Never),
    ("name", Omit::Never),
    ("uid", Omit::Never),
    ("controller", Omit::Null),
    ("blockOwnerDeletion", Omit::Null),
];

const MANAGED_FIELDS_ENTRY: &[(&str, Omit)] = &[
    ("manager", Omit::Empty),
    ("operation", Omit::Empty),
    ("apiVersion", Omit::Empty),
    ("time", Omit::Null),
    ("fieldsType", Omit::Empty),
    ("fieldsV1", Omit::Null),
    ("subresource", Omit::Empty),
];

/// `metav1.ObjectMeta` in struct order (k8s.io/apimachinery types.go).
const OBJECT_META: &[(&str, Omit, Value)] = &[
    ("name", Omit::Empty, Value::Raw),
    ("generateName", Omit::Empty, Value::Raw),
    ("namespace", Omit::Empty, Value::Raw),
    ("selfLink", Omit::Empty, Value::Raw),
    ("uid", Omit::Empty, Value::Raw),
    ("resourceVersion", Omit::Empty, Value::Raw),
    ("generation", Omit::Empty, Value::Raw),
    ("creationTimestamp", Omit::Null, Value::Raw),
    ("deletionTimestamp", Omit::Null, Value::Raw),
    ("deletionGracePeriodSeconds", Omit::Null, Value::Raw),
    ("labels", Omit::Empty, Value::Raw),
    ("annotations", Omit::Empty, Value::Raw),
    ("ownerReferences", Omit::Empty, Value::Objects(OWNER_REFERENCE)),
    ("finalizers", Omit::Empty, Value::Raw),
    ("managedFields", Omit::Empty, Value::Objects(MANAGED_FIELDS_ENTRY)),
];

/// The value of `key` (the last one if repeated, as a Go map keeps), skipped per `omit`.
fn member<'a>(members: &[(CowStr<'a>, &'a RawValue)], key: &str, omit: Omit) -> Option<&'a str> {
    let value = members.iter().rev().find(|(k, _)| k.0 == key).map(|(_, v)| v.get());
    match (omit, value) {
        // A Go string without omitempty reads a missing or null value as "" and writes it.
        (Omit::Never, None | Some("null")) => Some("\"\""),
        (_, Some("null")) | (_, None) => None,
        (Omit::Empty, Some("\"\"" | "0" | "{}" | "[]")) => None,
        (_, value) => value,
    }
}

/// Writes `members` picked and ordered by `fields`, as a Go struct is written.
fn push_struct(out: &mut Vec<u8>, object: &str, fields: &[(&str, Omit)]) -> Result<(), Error> {
    let Members(members) = serde_json::from_str(object)?;
    out.push(b'{');
    let mut first = true;
    for (key, omit) in fields {
        if let Some(value) = member(&members, key, *omit) {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            push_key(out, key);
            out.extend_from_slice(value.as_bytes());
        }
    }
    out.push(b'}');
    Ok(())
}

/// Re-encodes an unstructured `metadata` object the way `metav1.ObjectMeta` is written.
fn typed_object_meta(metadata: &str) -> Result<Vec<u8>, Error> {
    let Members(members) = serde_json::from_str(metadata)?;
    let mut out = Vec::with_capacity(metadata.len());
    out.push(b'{');
    let mut first = true;
    for (key, omit, value) in OBJECT_META {
        let Some(raw) = member(&members, key, *omit) else { continue };
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        push_key(&mut out, key);
        match value {
            Value::Raw => out.extend_from_slice(raw.as_bytes()),
            Value::Objects(fields) => {
                let entries: Vec<&RawValue> = serde_json::from_str(raw)?;
                out.push(b'[');
                for (n, entry) in entries.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    push_struct(&mut out, entry.get(), fields)?;
                }
                out.push(b']');
            }
        }
    }
    out.push(b'}');
    Ok(out)
}

#[cfg(test)]
mod tests;
