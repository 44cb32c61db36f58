//! The JSON side of the wire: reading an object's routing metadata from its bytes, and building
//! the few JSON documents the proxy assembles around cached objects (lists, PartialObjectMetadata,
//! BOOKMARK objects, watch event lines) byte-identical to kube-apiserver's output.
//!
//! Objects themselves are never re-serialized: their bytes (as the upstream sent them) are
//! spliced in. Only short strings the proxy chooses (kinds, resourceVersions, continue tokens) are
//! encoded here, with Go's `encoding/json` escaping ([`super::gojson::push_string`]) so they match
//! the apiserver's bytes.
//!
//! Shape rules (fixtures `cm-get-json`, `cm-list-json`, `watch-json`): a built-in object on its
//! own (GET, watch event) starts with `"kind"` then `"apiVersion"`; the same object as a list item
//! has neither. A body (GET, list) ends with `\n`; an object inside a list or event does not.
//! Custom resources follow other rules (Go writes their maps with sorted keys): see
//! [`unstructured`].

use std::borrow::Cow;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::gojson::push_string;

pub mod unstructured;

/// Annotation on the BOOKMARK that ends the initial events of a `sendInitialEvents` watch.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// `metav1.ListMeta` of a list being built or read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListMeta<'a> {
    pub resource_version: &'a str,
    /// Empty when this is the last page.
    pub continue_token: &'a str,
    /// Set only on a paged list without selectors, as the apiserver does.
    pub remaining_item_count: Option<i64>,
}

/// The ObjectMeta fields an object is routed and filtered by, borrowed from its bytes where
/// possible (JSON strings with escapes are the exception).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMetaRef<'a> {
    pub name: Cow<'a, str>,
    /// Empty for cluster-scoped objects.
    pub namespace: Cow<'a, str>,
    pub uid: Cow<'a, str>,
    pub resource_version: Cow<'a, str>,
    /// In the order of the bytes, which is sorted by key in apiserver output.
    pub labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl ObjectMetaRef<'_> {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_ref())
    }
}

/// Why JSON bytes could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("json value is not an object")]
    NotAnObject,
}

/// A JSON string that borrows from the input when it has no escapes; `null` reads as empty, as
/// Go's decoder leaves a string field untouched on `null`.
struct CowStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for CowStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for StrVisitor<'a> {
            type Value = CowStr<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed("")))
            }
        }
        deserializer.deserialize_any(StrVisitor(std::marker::PhantomData))
    }
}

/// A JSON object's members in document order, values kept as raw text.
struct Members<'a>(Vec<(CowStr<'a>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(entry) = map.next_entry()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct ObjectShape<'a> {
    #[serde(borrow, default)]
    metadata: Option<MetaShape<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaShape<'a> {
    #[serde(borrow, default)]
    name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    namespace: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    uid: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    resource_version: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    labels: Option<Labels<'a>>,
}

struct Labels<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for LabelsVisitor<'a> {
            type Value = Labels<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut labels = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((CowStr(k), CowStr(v))) = map.next_entry()? {
                    labels.push((k, v));
                }
                Ok(Labels(labels))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Labels(Vec::new()))
            }
        }
        deserializer.deserialize_any(LabelsVisitor(std::marker::PhantomData))
    }
}

/// The routing fields of an object from its JSON bytes (with or without kind/apiVersion), without
/// building a `Value`: other members are skipped unparsed beyond validation.
pub fn object_meta_json(object: &[u8]) -> Result<ObjectMetaRef<'_>, Error> {
    let shape: ObjectShape<'_> = serde_json::from_slice(object)?;
    let Some(meta) = shape.metadata else { return Ok(ObjectMetaRef::default()) };
    fn text(s: Option<CowStr<'_>>) -> Cow<'_, str> {
        s.map(|CowStr(c)| c).unwrap_or_default()
    }
    Ok(ObjectMetaRef {
        name: text(meta.name),
        namespace: text(meta.namespace),
        uid: text(meta.uid),
        resource_version: text(meta.resource_version),
        labels: meta.labels.map(|Labels(l)| l).unwrap_or_default(),
    })
}

/// Appends `"key":` with Go escaping.
fn push_key(buf: &mut Vec<u8>, key: &str) {
    push_string(buf, key);
    buf.push(b':');
}

/// A built-in object as a list item: the same bytes without the `kind` and `apiVersion` members
/// (cm-get-json → cm-list-json). Only for built-in kinds: custom resource list items keep them.
pub fn strip_type_meta(object: &[u8]) -> Result<Vec<u8>, Error> {
    let Members(members) = serde_json::from_slice(object)?;
    let mut out = Vec::with_capacity(object.len());
    out.push(b'{');
    let kept = members.iter().filter(|(k, _)| k.0 != "kind" && k.0 != "apiVersion");
    for (n, (CowStr(key), value)) in kept.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        push_key(&mut out, key);
        out.extend_from_slice(value.get().as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// The inverse of [`strip_type_meta`]: a list item of a built-in kind as its GET / watch object,
/// with `"kind"` and `"apiVersion"` first, as Go writes the inlined TypeMeta.
pub fn with_type_meta(item: &[u8], api_version: &str, kind: &str) -> Result<Vec<u8>, Error> {
    let body = item.trim_ascii();
    let rest = body.strip_prefix(b"{").ok_or(Error::NotAnObject)?;
    let mut out = Vec::with_capacity(item.len() + kind.len() + api_version.len() + 26);
    out.push(b'{');
    push_key(&mut out, "kind");
    push_string(&mut out, kind);
    out.push(b',');
    push_key(&mut out, "apiVersion");
    push_string(&mut out, api_version);
    if rest.trim_ascii_start().first() != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Ok(out)
}

/// Appends a ListMeta object: Go omits every empty member (`selfLink` is never set any more).
fn push_list_meta(buf: &mut Vec<u8>, meta: &ListMeta<'_>) {
    buf.push(b'{');
    let mut first = true;
    let mut sep = |buf: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            buf.push(b',');
        }
    };
    if !meta.resource_version.is_empty() {
        sep(buf);
        push_key(buf, "resourceVersion");
        push_string(buf, meta.resource_version);
    }
    if !meta.continue_token.is_empty() {
        sep(buf);
        push_key(buf, "continue");
        push_string(buf, meta.continue_token);
    }
    if let Some(count) = meta.remaining_item_count {
        sep(buf);
        push_key(buf, "remainingItemCount");
        buf.extend_from_slice(count.to_string().as_bytes());
    }
    buf.push(b'}');
}

/// Opens a list body up to `"items":`.
fn start_list(api_version: &str, list_kind: &str, meta: &ListMeta<'_>, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity + 96 + meta.continue_token.len());
    out.push(b'{');
    push_key(&mut out, "kind");
    push_string(&mut out, list_kind);
    out.push(b',');
    push_key(&mut out, "apiVersion");
    push_string(&mut out, api_version);
    out.push(b',');
    push_key(&mut out, "metadata");
    push_list_meta(&mut out, meta);
    out.push(b',');
    push_key(&mut out, "items");
    out
}

/// A list body of a built-in kind (`{"kind":"<Kind>List",...,"items":[...]}` + `\n`) from items
/// already in list-item form (see [`strip_type_meta`]). An empty list has `"items":[]`.
pub fn list_json(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[impl AsRef<[u8]>],
) -> Vec<u8> {
    let size: usize = items.iter().map(|i| i.as_ref().len() + 1).sum();
    let mut out = start_list(api_version, list_kind, meta, size);
    out.push(b'[');
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.as_ref());
    }
    out.extend_from_slice(b"]}\n");
    out
}

/// [`list_json`] as parts to write one after the other: the items' own buffers are shared, not
/// copied, so a large list is never assembled in memory.
pub fn list_json_parts(
    api_version: &str,
    list_kind: &str,
    meta: &ListMeta<'_>,
    items: &[bytes::Bytes],
) -> Vec<bytes::Bytes> {
    let mut head = start_list(api_version, list_kind, meta, 0);
    head.push(b'[');
    let mut parts = Vec::with_capacity(items.len() * 2 + 2);
    parts.push(bytes::Bytes::from(head));
    let comma = bytes::Bytes::from_static(b",");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            parts.push(comma.clone());
        }
        parts.push(item.clone());
    }
    parts.push(bytes::Bytes::from_static(b"]}\n"));
    parts
}

/// The raw `metadata` value of an object (`{}` when it has none).
fn raw_metadata(object: &[u8]) -> Result<&str, Error> {
    #[derive(Deserialize)]
    struct MetaOnly<'a> {
        #[serde(borrow, default)]
        metadata: Option<&'a RawValue>,
    }
    let shape: MetaOnly<'_> = serde_json::from_slice(object)?;
    Ok(shape.metadata.map_or("{}", RawValue::get))
}

fn push_partial(out: &mut Vec<u8>, api_version: &str, metadata: &[u8]) {
    out.push(b'{');
    push_key(out, "kind");
    push_string(out, "PartialObjectMetadata");
    out.push(b',');
    push_key(out, "apiVersion");
    push_string(out, api_version);
    out.push(b',');
    push_key(out, "metadata");
    out.extend_from_slice(metadata);
    out.push(b'}');
}

/// An object as PartialObjectMetadata (no trailing newline: add one for a GET body), for
/// `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`. `api_version` is the
/// negotiated `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
///
/// The metadata bytes are copied as they are, which is exact for built-in kinds. A custom
/// resource's JSON has its keys sorted while the apiserver writes ObjectMeta in struct order: use
/// [`unstructured::partial_object_metadata_json`] for those.
pub fn partial_object_metadata_json(object: &[u8], api_version: &str) -> Result<Vec<u8>, Error> {
    let metadata = raw_metadata(object)?;
    let mut out = Vec::with_capacity(metadata.len() + api_version.len() + 64);
    push_partial(&mut out, api_version, metadata.as_bytes());
    Ok(out)
}

/// A PartialObjectMetadataList body (with `\n`). The apiserver builds this list afresh and never
/// initialises its items, so an empty one is `"items":null`.
pub fn partial_object_metadata_list_json(
    api_version: &str,
    meta: &ListMeta<'_>,
    objects: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, Error> {
    let metadata =
        objects.iter().map(|o| raw_metadata(o.as_ref())).collect::<Result<Vec<_>, _>>()?;
    Ok(partial_list(api_version, meta, &metadata))
}

/// A PartialObjectMetadataList from each item's `metadata` JSON.
fn partial_list(api_version: &str, meta: &ListMeta<'_>, metadata: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let size: usize = metadata.iter().map(|m| m.as_ref().len() + api_version.len() + 64).sum();
    let mut out = start_list(api_version, "PartialObjectMetadataList", meta, size);
    if metadata.is_empty() {
        out.extend_from_slice(b"null}\n");
        return out;
    }
    out.push(b'[');
    for (n, m) in metadata.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        push_partial(&mut out, api_version, m.as_ref());
    }
    out.extend_from_slice(b"]}\n");
    out
}

/// The object of a BOOKMARK event for a built-in kind (or PartialObjectMetadata), as the watch
/// cache writes it: an empty object with only `metadata.resourceVersion`, plus the
/// initial-events-end annotation when it closes a `sendInitialEvents` stream (watchlist-json).
/// `empty_tail` is what Go writes after `metadata` for an empty object of the kind (e.g.
/// `,"spec":{"containers":null},"status":{}` for a Pod): `proto::empty_object_tail(..).json`.
pub fn bookmark_json(
    api_version: &str,
    kind: &str,
    resource_version: &str,
    initial_events_end: bool,
    empty_tail: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + empty_tail.len());
    out.push(b'{');
    push_key(&mut out, "kind");
    push_string(&mut out, kind);
    out.push(b',');
    push_key(&mut out, "apiVersion");
    push_string(&mut out, api_version);
    out.extend_from_slice(b",\"metadata\":{\"resourceVersion\":");
    push_string(&mut out, resource_version);
    if initial_events_end {
        out.extend_from_slice(b",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}");
    }
    out.push(b'}');
    out.extend_from_slice(empty_tail.as_bytes());
    out.push(b'}');
    out
}

/// The object with `metadata.resourceVersion` set to `rv`, every other byte kept: what the watch
/// cache sends as DELETED for an object that left a filtered watch's selection (its previous
/// state, with the event's resourceVersion).
pub fn with_resource_version_json(object: &[u8], rv: &str) -> Result<Vec<u8>, Error> {
    let Members(members) = serde_json::from_slice(object)?;
    let metadata = members
        .iter()
        .find(|(k, _)| k.0 == "metadata")
        .map(|(_, v)| v.get())
        .ok_or(Error::NotAnObject)?;
    let Members(meta) = serde_json::from_str(metadata)?;
    let value = meta
        .iter()
        .find(|(k, _)| k.0 == "resourceVersion")
        .map(|(_, v)| v.get())
        .ok_or(Error::NotAnObject)?;
    // Both are slices of `object` (RawValue borrows), so their offsets locate the value.
    let start = (value.as_ptr() as usize).wrapping_sub(object.as_ptr() as usize);
    let end = start.checked_add(value.len()).filter(|e| *e <= object.len());
    let (Some(head), Some(tail)) = (object.get(..start), end.and_then(|e| object.get(e..))) else {
        return Err(Error::NotAnObject);
    };
    let mut out = Vec::with_capacity(object.len() + rv.len());
    out.extend_from_slice(head);
    push_string(&mut out, rv);
    out.extend_from_slice(tail);
    Ok(out)
}

/// One JSON watch event line: `{"type":..,"object":..}` + `\n`, the object spliced in as is.
pub fn watch_event_json(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(object.len() + event_type.len() + 24);
    out.extend_from_slice(b"{\"type\":");
    push_string(&mut out, event_type);
    out.extend_from_slice(b",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    out
}

/// A JSON watch event read from the upstream; `object` borrows the event's bytes (use
/// `Bytes::slice_ref` to keep it without copying).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEventJson<'a> {
    pub event_type: Cow<'a, str>,
    pub object: &'a [u8],
}

/// Reads one JSON watch event (one line of the stream, with or without its `\n`).
pub fn parse_watch_event_json(event: &[u8]) -> Result<WatchEventJson<'_>, Error> {
    #[derive(Deserialize)]
    struct Event<'a> {
        #[serde(borrow, rename = "type")]
        event_type: CowStr<'a>,
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let Event { event_type: CowStr(event_type), object } = serde_json::from_slice(event)?;
    Ok(WatchEventJson { event_type, object: object.get().as_bytes() })
}

#[cfg(test)]
mod tests;
