//! What the proxy reads from and builds around an object's message: its ObjectMeta (field 1 of
//! every Kubernetes object), PartialObjectMetadata views, and BOOKMARK objects.

use std::borrow::Cow;

use super::super::meta::{ListMeta, ObjectMetaRef, INITIAL_EVENTS_END_ANNOTATION};
use super::codec::{
    expect_len, expect_str, len_field_size, put_bytes_field, put_len_header, put_varint_field,
    varint_len, Fields,
};
use super::envelope::{encode_list_items, finish_envelope, start_envelope, Item};
use super::error::Error;

/// The bytes of an object's ObjectMeta message (field 1 of its bare message).
///
/// gogo writes `metadata` exactly once and first; the first occurrence is the one returned.
pub fn object_meta_bytes(raw_message: &[u8]) -> Result<&[u8], Error> {
    for field in Fields::new(raw_message) {
        if let (1, value) = field? {
            return expect_len(value, "metadata");
        }
    }
    Err(Error::MissingField("metadata"))
}

/// The bare message with ObjectMeta's `resourceVersion` (field 6) set to `rv`, every other byte
/// kept (see `meta::with_resource_version_json`).
pub fn with_resource_version(raw_message: &[u8], rv: &str) -> Result<Vec<u8>, Error> {
    let meta = object_meta_bytes(raw_message)?;
    let mut old = None;
    for field in Fields::new(meta) {
        if let (6, value) = field? {
            old = Some(expect_len(value, "resourceVersion")?);
        }
    }
    let old = old.ok_or(Error::MissingField("resourceVersion"))?;
    // Offsets of sub-slices; a one-byte tag and the length varint precede each value.
    let offset = |outer: &[u8], inner: &[u8]| {
        (inner.as_ptr() as usize).wrapping_sub(outer.as_ptr() as usize)
    };
    let span = |outer: &[u8], inner: &[u8]| -> Result<(usize, usize), Error> {
        let start = offset(outer, inner)
            .checked_sub(1 + varint_len(inner.len() as u64))
            .ok_or(Error::Truncated)?;
        let end = offset(outer, inner).checked_add(inner.len()).ok_or(Error::Truncated)?;
        (end <= outer.len()).then_some((start, end)).ok_or(Error::Truncated)
    };
    let (rv_start, rv_end) = span(meta, old)?;
    let mut new_meta = Vec::with_capacity(meta.len() + rv.len());
    new_meta.extend_from_slice(meta.get(..rv_start).ok_or(Error::Truncated)?);
    put_bytes_field(&mut new_meta, 6, rv.as_bytes());
    new_meta.extend_from_slice(meta.get(rv_end..).ok_or(Error::Truncated)?);
    let (meta_start, meta_end) = span(raw_message, meta)?;
    let mut out = Vec::with_capacity(raw_message.len() + rv.len());
    out.extend_from_slice(raw_message.get(..meta_start).ok_or(Error::Truncated)?);
    put_len_header(&mut out, 1, new_meta.len());
    out.extend_from_slice(&new_meta);
    out.extend_from_slice(raw_message.get(meta_end..).ok_or(Error::Truncated)?);
    Ok(out)
}

/// The routing fields of an object's ObjectMeta, borrowed from its bare message.
pub fn object_meta(raw_message: &[u8]) -> Result<ObjectMetaRef<'_>, Error> {
    let mut meta = ObjectMetaRef::default();
    // ObjectMeta field numbers (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
    for field in Fields::new(object_meta_bytes(raw_message)?) {
        match field? {
            (1, value) => meta.name = Cow::Borrowed(expect_str(value, "name")?),
            (3, value) => meta.namespace = Cow::Borrowed(expect_str(value, "namespace")?),
            (5, value) => meta.uid = Cow::Borrowed(expect_str(value, "uid")?),
            (6, value) => {
                meta.resource_version = Cow::Borrowed(expect_str(value, "resourceVersion")?)
            }
            (11, value) => meta.labels.push(map_entry(expect_len(value, "labels")?)?),
            _ => {}
        }
    }
    Ok(meta)
}

/// One `map<string, string>` entry (key = 1, value = 2; a missing one is the empty string).
fn map_entry(entry: &[u8]) -> Result<(Cow<'_, str>, Cow<'_, str>), Error> {
    let (mut key, mut value) = ("", "");
    for field in Fields::new(entry) {
        match field? {
            (1, v) => key = expect_str(v, "labels key")?,
            (2, v) => value = expect_str(v, "labels value")?,
            _ => {}
        }
    }
    Ok((Cow::Borrowed(key), Cow::Borrowed(value)))
}

/// Whether an object's ObjectMeta carries annotation `key` with value `value` (annotations are
/// ObjectMeta's field 12, map entries of key = 1, value = 2). Malformed bytes carry none.
pub fn has_annotation(raw_message: &[u8], key: &str, value: &str) -> bool {
    let Ok(meta) = object_meta_bytes(raw_message) else { return false };
    Fields::new(meta).map_while(Result::ok).any(|(f, v)| {
        f == 12
            && expect_len(v, "annotations")
                .and_then(map_entry)
                .is_ok_and(|(k, v)| k == key && v == value)
    })
}

/// The PartialObjectMetadata body (`k8s\0` envelope) of one object, as the apiserver answers
/// `Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
/// `api_version` is `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as negotiated. The message is
/// ObjectMeta in field 1, copied byte for byte from the object.
pub fn partial_object_metadata(raw_message: &[u8], api_version: &str) -> Result<Vec<u8>, Error> {
    let meta = object_meta_bytes(raw_message)?;
    let mut buf =
        start_envelope(api_version, "PartialObjectMetadata", len_field_size(1, meta.len()));
    put_bytes_field(&mut buf, 1, meta);
    Ok(finish_envelope(buf))
}

/// The PartialObjectMetadataList body for bare object messages, in the order given.
pub fn partial_object_metadata_list(
    api_version: &str,
    meta: &ListMeta<'_>,
    raw_messages: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, Error> {
    let metas = raw_messages
        .iter()
        .map(|raw| object_meta_bytes(raw.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let items = metas.iter().map(|meta| Item::Wrapped(1, meta));
    Ok(encode_list_items(api_version, "PartialObjectMetadataList", meta, items))
}

/// The object of a BOOKMARK event in protobuf, as the watch cache sends it: an empty object of
/// the kind whose ObjectMeta has only `resourceVersion` (and, for the bookmark that ends a
/// `sendInitialEvents` stream, the `k8s.io/initial-events-end: "true"` annotation).
///
/// An empty object is not an empty message: gogo writes every non-pointer field, so an empty Pod
/// still carries `spec` and `status` with their empty strings. `empty_tail` is that part (the
/// fields after ObjectMeta), from [`empty_object_tail`] for built-in kinds, [`bookmark_tail`] of a
/// bookmark the upstream sent, or empty for `PartialObjectMetadata`.
pub fn bookmark(
    api_version: &str,
    kind: &str,
    resource_version: &str,
    initial_events_end: bool,
    empty_tail: &[u8],
) -> Vec<u8> {
    // ObjectMeta: name, generateName, namespace, selfLink, uid are empty strings gogo still
    // writes; resourceVersion; generation 0; creationTimestamp as an empty (zero) Time.
    let mut meta = Vec::with_capacity(64 + resource_version.len());
    for field in 1..=5 {
        put_bytes_field(&mut meta, field, b"");
    }
    put_bytes_field(&mut meta, 6, resource_version.as_bytes());
    put_varint_field(&mut meta, 7, 0);
    put_bytes_field(&mut meta, 8, b"");
    if initial_events_end {
        let mut entry = Vec::with_capacity(INITIAL_EVENTS_END_ANNOTATION.len() + 8);
        put_bytes_field(&mut entry, 1, INITIAL_EVENTS_END_ANNOTATION.as_bytes());
        put_bytes_field(&mut entry, 2, b"true");
        put_bytes_field(&mut meta, 12, &entry);
    }
    let raw_len = len_field_size(1, meta.len()) + empty_tail.len();
    let mut buf = start_envelope(api_version, kind, raw_len);
    put_bytes_field(&mut buf, 1, &meta);
    buf.extend_from_slice(empty_tail);
    finish_envelope(buf)
}

/// The fields after ObjectMeta in a bare message whose first field is ObjectMeta: for a bookmark
/// received from the upstream, this is the kind's empty-object tail to pass to [`bookmark`].
pub fn bookmark_tail(raw_message: &[u8]) -> Result<&[u8], Error> {
    let mut fields = Fields::new(raw_message);
    match fields.next() {
        Some(Ok((1, value))) => {
            let meta = expect_len(value, "metadata")?;
            let start = len_field_size(1, meta.len());
            raw_message.get(start..).ok_or(Error::Truncated)
        }
        Some(Err(err)) => Err(err),
        _ => Err(Error::MissingField("metadata")),
    }
}

/// What an empty object of a built-in kind has after its metadata, in each encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptyObjectTails {
    /// JSON members after `"metadata":{...}`, each with its leading comma (may be empty).
    pub json: &'static str,
    /// Protobuf fields after ObjectMeta (may be empty).
    pub protobuf: &'static [u8],
}

/// The empty-object tails of a built-in kind (generated from k8s.io/api), or `None` for kinds
/// this build does not know (custom resources have none: their bookmarks are `{apiVersion, kind,
/// metadata}` only).
pub fn empty_object_tail(api_version: &str, kind: &str) -> Option<EmptyObjectTails> {
    let table = super::empty_objects::EMPTY_OBJECTS;
    table
        .binary_search_by(|(av, k, _, _)| (*av, *k).cmp(&(api_version, kind)))
        .ok()
        .and_then(|i| table.get(i))
        .map(|(_, _, json, protobuf)| EmptyObjectTails { json, protobuf })
}

#[cfg(test)]
mod tests;
